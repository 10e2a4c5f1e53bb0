"""Why a replica cannot be compiled or run as asked (core errors: the API maps them to 422s).

ReplicaError (PlanningError)           the deployment or the run asks what the engine cannot do
 ├─ MissingInterconnectBandwidthError  a KV hand-off over a link of unknown bandwidth
 ├─ RequestTooLongError                a request longer than ``max_model_len``
 ├─ SimulationTooLargeError            more prefill steps than one run may take
 └─ WholePromptOverflowError           a request over a whole-prompt scheduler's budget

Each error names the field where the fix lies as a JSON pointer in the request layout the API,
the CLI and :class:`~servesize.core.errors.FieldIssue` share (``/deployment/...``); a memory
plan that does not fit is the existing :class:`~servesize.core.errors.InsufficientMemoryError`.
"""

from __future__ import annotations

from servesize.core.errors import PlanningError

__all__ = [
    "MissingInterconnectBandwidthError",
    "ReplicaError",
    "RequestTooLongError",
    "SimulationTooLargeError",
    "WholePromptOverflowError",
]


class ReplicaError(PlanningError):
    """A replica that cannot be compiled or run as asked; ``field`` is where the fix lies."""

    def __init__(self, detail: str, *, field: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


class MissingInterconnectBandwidthError(ReplicaError):
    """A disaggregated replica hands its KV over a link whose bandwidth nobody gave."""

    def __init__(self, hardware_id: str) -> None:
        super().__init__(
            f"{hardware_id} has no interconnect bandwidth; give kv_transfer.bandwidth_bytes_per_s",
            field="/disaggregation/kv_transfer/bandwidth_bytes_per_s",
        )
        self.hardware_id = hardware_id


class RequestTooLongError(ReplicaError):
    """Requests whose prompt plus output exceed ``max_model_len``: the engine refuses them."""

    def __init__(self, count: int, first: int, longest_tokens: int, max_model_len: int) -> None:
        super().__init__(
            f"{count} requests exceed max_model_len ({max_model_len} tokens of prompt plus "
            f"output): the engine would refuse them; the first is request {first}, the longest "
            f"holds {longest_tokens} tokens",
            field="/deployment/max_model_len",
        )
        self.count = count
        self.first = first
        self.longest_tokens = longest_tokens
        self.max_model_len = max_model_len


class SimulationTooLargeError(ReplicaError):
    """The prompts need more prefill steps than one run may take at this token budget."""

    def __init__(self, steps: float, budget_tokens: int, max_steps: int) -> None:
        super().__init__(
            f"the prompts need about {steps:,.0f} prefill steps at a budget of {budget_tokens} "
            f"tokens per step; one simulation is limited to {max_steps:,} (a larger "
            "max_num_batched_tokens or fewer requests)",
            field="/deployment/max_num_batched_tokens",
        )
        self.steps = steps
        self.budget_tokens = budget_tokens
        self.max_steps = max_steps


class WholePromptOverflowError(ReplicaError):
    """A scheduler without chunked prefill meets a request longer than one rank's budget.

    The engine refuses such a request (TensorRT-LLM's default), so every one of them would be
    rejected. ``longest_tokens`` counts the prompt and all but the last output token: a request
    preempted late recomputes them in one step; under ``guaranteed_no_evict``, which never
    preempts, the prompt alone (:func:`~servesize.core.simulation.whole_prompt_overflow`).
    """

    def __init__(self, longest_tokens: int, rank_budget_tokens: int, *, explicit: bool) -> None:
        why = "policy 'no_chunking'" if explicit else "the engine's default scheduler (no chunking)"
        super().__init__(
            f"{why} computes a request's prompt (and, after a preemption, its output so far) in "
            f"one step, but requests reach {longest_tokens} tokens and the budget is "
            f"{rank_budget_tokens} per rank: raise max_num_batched_tokens to at least "
            f"{longest_tokens} or turn chunked prefill on (policy 'vllm_v1')",
            field="/deployment/max_num_batched_tokens",
        )
        self.longest_tokens = longest_tokens
        self.rank_budget_tokens = rank_budget_tokens
        self.explicit = explicit
