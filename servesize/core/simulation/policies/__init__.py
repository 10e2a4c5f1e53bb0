"""Scheduling policies of a simulated replica, one module each, and their registry.

A new policy is a module here with a :class:`BatchFormation` subclass, a name in
:data:`~servesize.core.simulation.config.SchedulingPolicy` and an entry in :data:`FORMATIONS`.
"""

from __future__ import annotations

from servesize.core.simulation.config import SchedulerConfig, SchedulingPolicy
from servesize.core.simulation.policies.base import BatchFormation
from servesize.core.simulation.policies.prefill_first import PrefillFirst
from servesize.core.simulation.policies.sarathi import Sarathi
from servesize.core.simulation.policies.vllm_v1 import VllmV1
from servesize.core.simulation.policies.whole_prompt import WholePrompt

__all__ = ["FORMATIONS", "BatchFormation", "batch_formation"]

FORMATIONS: dict[SchedulingPolicy, type[BatchFormation]] = {
    "vllm_v1": VllmV1,
    "sarathi": Sarathi,
    "no_chunking": WholePrompt,
    "prefill_first": PrefillFirst,
}
"""The batch formation of each :data:`SchedulingPolicy`."""


def batch_formation(config: SchedulerConfig, *, remote_kv: bool = False) -> BatchFormation:
    """The policy object of ``config.policy`` (on a disaggregated decode replica, whose prompts
    arrive as KV, the one its :meth:`~BatchFormation.on_decode_replica` names)."""
    formation = FORMATIONS[config.policy]
    if remote_kv:
        formation = formation.on_decode_replica()
    return formation(config)
