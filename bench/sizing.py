"""Auto-sizing speed: one search over at least 200 candidate configurations, verification included.

``python -m bench.sizing`` prints the wall time, candidates per second and the simulations run
(docs/modeling.md §5.4: within 10 s on a 2-core machine), and the process CPU time, which other
work on the machine does not inflate.
"""

from __future__ import annotations

import time

from servesize.calibration import tables_for_gpu
from servesize.catalog import ModelCatalog
from servesize.core.hardware import datasheet_spec
from servesize.core.sizing import SearchSpace, SizingTraffic, size
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.traffic import FixedLength
from servesize.db.seed import datasheet_entries
from servesize.settings import get_settings

MODEL = "meta-llama/Llama-3.1-8B"
PRICES = {"h100-sxm": 2.5, "h200-sxm": 3.5, "a100-sxm-80gb": 1.6, "l40s": 1.0, "l4": 0.5}


def main() -> None:
    arch = ModelCatalog(get_settings().models_dir).architecture(MODEL)
    hardware = tuple(datasheet_spec(e) for e in datasheet_entries())
    space = SearchSpace(hardware=hardware, max_model_len=(4096,), disaggregation=True)
    objective = ServiceLevelObjective(
        targets=(
            LatencyTarget(metric="ttft", statistic="p95", limit_s=1.0),
            LatencyTarget(metric="tpot", statistic="p95", limit_s=0.05),
        )
    )
    started = time.perf_counter()
    cpu_started = time.process_time()
    # as `servesize size` plans: the H100 tables, scaled to every other GPU (modeling.md §2.11)
    measured = {h.id: t for h in hardware if (t := tables_for_gpu(h)) is not None}
    result = size(
        arch,
        model_name=MODEL,
        space=space,
        traffic=SizingTraffic(
            rate_per_s=50.0, input_tokens=FixedLength(1024), output_tokens=FixedLength(256)
        ),
        objective=objective,
        prices=PRICES,
        measured=measured,
    )
    wall_s = time.perf_counter() - started
    cpu_s = time.process_time() - cpu_started
    best = result.plans[0]
    print(
        f"sizing: {result.candidates_evaluated} candidates, {result.simulations} simulations "
        f"({result.simulated_requests} requests), "
        f"{wall_s:.2f} s wall, {cpu_s:.2f} s CPU "
        f"({result.candidates_evaluated / wall_s:.0f} candidates/s); best: "
        f"{best.candidate.label} x{best.replicas} at ${best.cost_per_hour}/h "
        f"(verified: {best.verified}, {best.verification})"
    )


if __name__ == "__main__":
    main()
