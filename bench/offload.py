"""KV offload against the vLLM offloading-connector blog (validation only).

``python -m bench.offload`` (or ``python -m bench.accuracy --offload``): Llama-3.1-8B on an H100
SXM (the measured H100 kernel tables), vLLM with GPU prefix caching off and a 400 GiB host tier
(the post's setup, ``servesize/data/validation/kv_offload.json``). For each prompt length one
request warms the host tier and a second with the same prompt arrives 1,000 s later; its engine
TTFT without the tier (recompute) over its TTFT with it (load ``⌊(P − 1)/16⌋`` blocks over the
host link, prefill the rest) is the speed-up the post reports as 2× to 22× over 1K to 90K
prompts. Prints each ratio, and the error of the two ends against the published ones.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

import servesize
from servesize.calibration import load_measured_profile, reference_gpu
from servesize.core.architecture import parse_architecture
from servesize.core.memory import Deployment, KVOffload
from servesize.core.replica import compile_replica, simulate_replica
from servesize.core.simulation import ClientOverheads
from servesize.core.traffic import PrefixAssignment, trace_workload

DATA = Path(servesize.__file__).parent / "data"
MODEL = "meta-llama--Llama-3.1-8B.json"
PROMPTS = (1000, 2000, 4000, 8000, 16000, 32000, 64000, 90000)


def _ttft(offload: KVOffload | None, prompt: int) -> float:
    arch = parse_architecture(json.loads((DATA / "models" / MODEL).read_text()), name=MODEL)
    deployment = Deployment(max_model_len=131072, enable_prefix_caching=False, kv_offload=offload)
    replica = compile_replica(arch, reference_gpu("H100 SXM"), deployment, load_measured_profile())
    base = trace_workload(
        arrival_s=np.array([0.0, 1000.0]),
        prompt_tokens=np.array([prompt, prompt]),
        output_tokens=np.array([1, 1]),
        timeout_s=math.inf,
    )
    workload = replace(
        base,
        prefix=PrefixAssignment(
            group=np.zeros(2, dtype=np.int64), shared_tokens=np.full(2, prompt, dtype=np.int64)
        ),
    )
    run = simulate_replica(replica, workload, overheads=ClientOverheads())
    result = run.result
    return float(result.first_token_s[1] - result.arrival_s[1])


def offload_ratios() -> list[tuple[int, float, float]]:
    """Per prompt: TTFT recomputing, TTFT loading from the host tier (seconds)."""
    rows = []
    for prompt in PROMPTS:
        rows.append((prompt, _ttft(None, prompt), _ttft(KVOffload(size_gib=400), prompt)))
    return rows


def print_offload() -> None:
    doc = json.loads((DATA / "validation" / "kv_offload.json").read_text())
    published = doc["measurements"][0]["results"]["single_request_ttft_reduction_range"]
    print("vLLM OffloadingConnector, Llama-3.1-8B, H100 SXM, single request (vLLM blog 2026-01-08)")
    print(f"  {'prompt':>7s} {'recompute ms':>13s} {'host load ms':>13s} {'speed-up':>9s}")
    rows = offload_ratios()
    for prompt, cold, warm in rows:
        print(f"  {prompt:7d} {cold * 1e3:13.1f} {warm * 1e3:13.1f} {cold / warm:8.1f}x")
    for label, (prompt, cold, warm), target in (
        ("shortest", rows[0], published[0]),
        ("longest", rows[-1], published[1]),
    ):
        ratio = cold / warm
        print(
            f"  {label} prompt ({prompt}): predicted {ratio:.1f}x, published {target:g}x, "
            f"error {ratio / target - 1:+.0%}"
        )


if __name__ == "__main__":
    print_offload()
