"""Speculative decoding against a published speed-up (judging only).

``python -m bench.bench_speculative`` prints, for Llama-3.1-8B on an H100 at batch 1, the
predicted plain decode rate and the EAGLE-3 speed-up at the assumed acceptance next to SGLang's
published figures (``servesize/data/validation/speculative_decoding.json``), the error of each,
and the per-token acceptance a chain of ``k`` drafts would need to reproduce the measurement.
"""

from __future__ import annotations

import json
from pathlib import Path

import servesize
from servesize.core.architecture import parse_architecture
from servesize.core.memory import Deployment
from servesize.core.replica import compile_replica
from servesize.core.speculative import SpeculativeDecoding, draft_plan, speedup_by_batch
from tests.core.sizing.fixtures import GPUS

DATA = Path(servesize.__file__).parent / "data"
ASSUMED = (3, 0.8)
"""``(k, α)``: a chain of 3 drafts at 0.8 (E = 2.952)."""


def predicted_speedup(k: int, alpha: float, engine: str) -> tuple[float, float]:
    """``(plain tokens/s, speed-up)`` at batch 1 with 1,024 tokens of context."""
    config = json.loads((DATA / "models" / "meta-llama--Llama-3.1-8B.json").read_text())
    arch = parse_architecture(config, name="meta-llama/Llama-3.1-8B")
    replica = compile_replica(arch, GPUS["h100-sxm"], Deployment(engine=engine, max_model_len=4096))
    spec = SpeculativeDecoding.of("eagle3", k, acceptance_rate=alpha)
    plan = draft_plan(spec, arch, 1)
    (point,) = speedup_by_batch(
        replica.step_model,
        spec,
        plan.shape,
        context_tokens=1024,
        batch_sizes=[1],
        bytes_per_param=plan.bytes_per_param,
        gpus=1,
    )
    return 1.0 / point.decode_step_s, point.speedup


def main() -> None:
    doc = json.loads((DATA / "validation" / "speculative_decoding.json").read_text())
    for m in doc["measurements"]:
        k, alpha = ASSUMED
        plain, gain = predicted_speedup(k, alpha, m["engine"])
        print(f"{m['id']} ({m['workload']})")
        err = plain / m["baseline_output_tokens_per_s"] - 1
        print(
            f"  plain decode   predicted {plain:8.1f} tok/s  measured "
            f"{m['baseline_output_tokens_per_s']:8.1f}  error {err:+.1%}"
        )
        err = gain / m["speedup"] - 1
        print(
            f"  EAGLE-3 k={k} α={alpha}  predicted ×{gain:.2f}  measured ×{m['speedup']:.2f}"
            f"  error {err:+.1%}"
        )
        lo, hi = 0.0, 0.99  # the speed-up grows with α: bisect for the measured one
        for _ in range(14):
            mid = (lo + hi) / 2
            lo, hi = (
                (mid, hi) if predicted_speedup(k, mid, m["engine"])[1] < m["speedup"] else (lo, mid)
            )
        need = hi if predicted_speedup(k, hi, m["engine"])[1] >= m["speedup"] else None
        print(
            f"  α needed for the measured speed-up at k={k}: "
            + (f"about {need:.2f}" if need is not None else "none below 0.99")
        )
        print(f"  source: {m['source']}")


if __name__ == "__main__":
    main()
