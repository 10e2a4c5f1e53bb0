"""Auto-sizing: the cheapest deployment that meets an SLO at a target load (issue 8,
modeling.md §3.11).

=============================  ==================================================================
``size``                       enumerate, prune, Tier A screen, replicas, cost, rank, verify
``SearchSpace``                hardware, engines, parallel sizes and knob grids to search
``SizingTraffic``              the forecast: rate, lengths, arrival process
``Plan`` / ``Rejection``       a costed deployment, or a pruned candidate with its reason
``replicas_needed``            ``ceil(target / (λ* × headroom))``
``zero_load_infeasibility``    each target no candidate meets idle: its best value, and where
``screen_curve``               Tier A: the largest per-replica rate meeting every target
``vllm_args``                  ``vllm serve`` / ``sglang.launch_server`` argument lists
=============================  ==================================================================
"""

from servesize.core.sizing.engine_args import sglang_args, vllm_args
from servesize.core.sizing.inputs import DEFAULT_HEADROOM, SizingTraffic
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
from servesize.core.sizing.space import Candidate, CandidateKind, SearchSpace, enumerate_candidates
from servesize.core.sizing.tier_a import replicas_needed
from servesize.core.sizing.verify import FLEET_MAX_REPLICAS, MAX_EXTRA_REPLICAS

__all__ = [
    "DEFAULT_HEADROOM",
    "FLEET_MAX_REPLICAS",
    "MAX_CANDIDATES",
    "MAX_EXTRA_REPLICAS",
    "UTILIZATION_CAP",
    "Candidate",
    "CandidateKind",
    "Miss",
    "Plan",
    "Predicted",
    "Rejection",
    "ScreenResult",
    "SearchSpace",
    "SizingResult",
    "SizingTooLargeError",
    "SizingTraffic",
    "TargetCurve",
    "VerificationMode",
    "ZeroLoadBest",
    "enumerate_candidates",
    "replicas_needed",
    "screen_curve",
    "sglang_args",
    "size",
    "target_curves",
    "vllm_args",
    "zero_load_infeasibility",
]
