"""Auto-sizing: the cheapest deployment that meets an SLO at a target load (docs/modeling.md
§3.11).

=============================  ==================================================================
``size``                       enumerate, prune, Tier A screen, replicas, cost, rank, verify
``SearchSpace``                hardware, engines, parallel sizes and knob grids to search
``SizingTraffic``              the forecast: rate, lengths, arrival process
``Plan`` / ``Rejection``       a costed deployment, or a pruned candidate with its reason
``replicas_needed``            ``ceil(target / (λ* × headroom))``
``zero_load_infeasibility``    each target no candidate meets idle: its best value, and where
``screen_curve``               Tier A: the largest per-replica rate meeting every target
``launch_plan``                the plan's engine's launch commands (vLLM, SGLang, TensorRT-LLM)
``TaskMap`` / ``serial_map``   how ``size`` runs its screening and simulation tasks (in order)
=============================  ==================================================================
"""

from servesize.core.sizing.defaults import default_max_model_len, upper_tokens
from servesize.core.sizing.engine_args import (
    COMMAND_VERSIONS,
    Role,
    sglang_args,
    shell_command,
    trtllm_args,
    trtllm_options,
    unsupported_kv,
    unsupported_layout,
    unsupported_speculative,
    vllm_args,
)
from servesize.core.sizing.explanation import explain
from servesize.core.sizing.inputs import DEFAULT_HEADROOM, SizingTraffic
from servesize.core.sizing.launch import LaunchCommand, LaunchPlan, launch_plan
from servesize.core.sizing.result import (
    Plan,
    Predicted,
    Rejection,
    SizingResult,
    VerificationMode,
    ZeroLoadBest,
    zero_load_infeasibility,
)
from servesize.core.sizing.screen import (
    UTILIZATION_CAP,
    Miss,
    ScreenResult,
    TargetCurve,
    screen_curve,
    target_curves,
)
from servesize.core.sizing.search import MAX_CANDIDATES, SizingTooLargeError, size
from servesize.core.sizing.slo_text import parse_slo
from servesize.core.sizing.space import (
    DEFAULT_KV_CACHE_DTYPES,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    Candidate,
    CandidateKind,
    SearchSpace,
    enumerate_candidates,
)
from servesize.core.sizing.tasks import TaskMap, serial_map
from servesize.core.sizing.tier_a import replicas_needed
from servesize.core.sizing.verify import FLEET_MAX_REPLICAS, MAX_EXTRA_REPLICAS

__all__ = [
    "COMMAND_VERSIONS",
    "DEFAULT_HEADROOM",
    "DEFAULT_KV_CACHE_DTYPES",
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "FLEET_MAX_REPLICAS",
    "MAX_CANDIDATES",
    "MAX_EXTRA_REPLICAS",
    "UTILIZATION_CAP",
    "Candidate",
    "CandidateKind",
    "LaunchCommand",
    "LaunchPlan",
    "Miss",
    "Plan",
    "Predicted",
    "Rejection",
    "Role",
    "ScreenResult",
    "SearchSpace",
    "SizingResult",
    "SizingTooLargeError",
    "SizingTraffic",
    "TargetCurve",
    "TaskMap",
    "VerificationMode",
    "ZeroLoadBest",
    "default_max_model_len",
    "enumerate_candidates",
    "explain",
    "launch_plan",
    "parse_slo",
    "replicas_needed",
    "screen_curve",
    "serial_map",
    "sglang_args",
    "shell_command",
    "size",
    "target_curves",
    "trtllm_args",
    "trtllm_options",
    "unsupported_kv",
    "unsupported_layout",
    "unsupported_speculative",
    "upper_tokens",
    "vllm_args",
    "zero_load_infeasibility",
]
