"""How many experts a batch touches.

With ``T`` tokens each routed to ``k`` of ``E`` experts uniformly at random, one expert is
missed by one token with probability ``1 − k/E``, so the expected number of distinct
experts touched is

``E_touched = E·(1 − (1 − k/E)^T)``

(1 token: ``k``; many tokens: all ``E``). Expert weights are read once per touched expert,
which is why small MoE decode batches read far fewer bytes than the full checkpoint.
Real routers are skewed, which touches fewer experts than this uniform bound.
"""

from __future__ import annotations

import numpy as np

from servesize.core.steptime._arrays import ArrayLike, FloatArray, as_float_array

__all__ = ["expected_experts_touched"]


def expected_experts_touched(
    tokens: ArrayLike, *, num_experts: int, experts_per_token: int
) -> FloatArray:
    """``E·(1 − (1 − k/E)^T)`` for each token count ``T``.

    >>> expected_experts_touched([0, 1, 10_000], num_experts=8, experts_per_token=2).tolist()
    [0.0, 2.0, 8.0]
    """
    if not 0 < experts_per_token <= num_experts:
        raise ValueError(
            f"need 0 < experts_per_token <= num_experts, got {experts_per_token}, {num_experts}"
        )
    t = as_float_array(tokens)
    miss = 1.0 - experts_per_token / num_experts
    return np.asarray(num_experts * (1.0 - np.power(miss, t)), dtype=np.float64)
