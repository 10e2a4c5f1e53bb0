"""Bit-for-bit fingerprints of 85 simulations, to check a simulator change changes no result.

``python -m bench.fingerprints before.json`` on the old code, then
``python -m bench.fingerprints after.json before.json`` on the new one prints the scenarios whose
result arrays or summary differ. Scenarios: the speed bench's workload (Llama-3.1-8B on H100,
vLLM) at 30-120 % load, every scheduling policy x capacity policy x output delay with timeouts on
two replicas (fast and linear step time), a waiting cap, sessions with both prefix caches with
and without a host KV tier, closed loops with and without skip-ahead, disaggregated pairs and
four round-robin replicas. About 20 s on a 2-core machine.
"""

import hashlib
import itertools
import json
import math
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from bench.simulate import _replica
from servesize.core.simulation import (
    ClientOverheads,
    KVTransfer,
    LinearStepTime,
    SchedulerConfig,
    SimulationResult,
    simulate,
    simulate_disaggregated,
)
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.simulation.config import HostKVConfig
from servesize.core.traffic import (
    FixedLength,
    LogNormalLength,
    OpenLoopWorkload,
    closed_loop_workload,
    open_loop_workload,
)
from servesize.core.traffic.sessions import SessionTraffic, session_workload


def fp(r: SimulationResult) -> str:
    h = hashlib.sha256()
    for f in fields(r):
        x = getattr(r, f.name)
        if isinstance(x, np.ndarray):
            h.update(f.name.encode())
            h.update(str(x.dtype).encode())
            h.update(np.ascontiguousarray(x).tobytes())
        else:
            h.update(repr(x).encode())
    h.update(repr(r.summary()).encode())
    return h.hexdigest()[:16]


scheduler, model, kv = _replica()
fast = steptime_adapter(model)
linear = LinearStepTime(base_s=0.004, per_token_s=2.5e-5, per_context_token_s=1e-9)
sat = 28.67
out: dict[str, str] = {}


def wl(
    n: int, rate: float, seed: int, timeout: float = math.inf, ln: bool = False
) -> OpenLoopWorkload:
    it = (
        LogNormalLength(mean_unclipped_tokens=1000, cv=1.0, max_tokens=6000)
        if ln
        else FixedLength(1024)
    )
    ot = (
        LogNormalLength(mean_unclipped_tokens=150, cv=1.0, max_tokens=1000)
        if ln
        else FixedLength(128)
    )
    return open_loop_workload(
        num_requests=n,
        rate_per_s=rate,
        input_tokens=it,
        output_tokens=ot,
        rng=np.random.default_rng(seed),
        warmup_requests=n // 10,
        timeout_s=timeout,
    )


for load in (0.3, 0.7, 0.9, 1.2):
    for seed in (1, 2):
        w = wl(1500, load * sat, seed)
        out[f"bench {load} {seed}"] = fp(simulate(w, scheduler, fast))
out["bench ln 0.8"] = fp(simulate(wl(1500, 0.8 * sat * 0.9, 3, ln=True), scheduler, fast))
out["bench 0.7 noskip"] = fp(
    simulate(wl(800, 0.7 * sat, 1), scheduler, fast, skip_decode_runs=False)
)


def small(**options: Any) -> SchedulerConfig:
    return SchedulerConfig(
        max_num_batched_tokens=2048,
        max_num_seqs=32,
        block_size_tokens=16,
        num_kv_blocks=900,
        **options,
    )


for pol, cap, delay, sm in itertools.product(
    ["vllm_v1", "sarathi", "no_chunking", "prefill_first"],
    ["incremental", "guaranteed_no_evict", "max_utilization", "new_token_ratio"],
    [0, 1],
    ["fast", "linear"],
):
    cfg = small(
        policy=pol,
        capacity_policy=cap,
        output_delay_steps=delay,
        max_waiting_requests=None,
    )
    w = wl(300, 14.0, 5, timeout=20.0, ln=True)
    st = fast if sm == "fast" else linear
    out[f"{pol} {cap} {delay} {sm}"] = fp(simulate(w, cfg, st, replicas=2, routing="least_loaded"))
cfg = small(max_waiting_requests=5, watermark_blocks=2, admit_full_prompt=True)
out["cap5"] = fp(simulate(wl(300, 20.0, 6, ln=True), cfg, fast))
for pc in ("free_queue_lru", "radix_lru"):
    cfg = small(prefix_caching=pc)
    tr = SessionTraffic(
        sessions_per_s=2.0,
        turns=FixedLength(4),
        new_tokens=FixedLength(200),
        output_tokens=FixedLength(60),
        think_time_s=2.0,
    )
    sw = session_workload(tr, num_sessions=80, rng=np.random.default_rng(7))
    out[f"sessions {pc}"] = fp(simulate(sw, cfg, fast))
    cfgh = small(prefix_caching=pc, host_kv=HostKVConfig(blocks=2000, block_load_s=1e-4))
    out[f"sessions host {pc}"] = fp(simulate(sw, cfgh, fast))
cl = closed_loop_workload(
    clients=16,
    num_requests=600,
    input_tokens=FixedLength(512),
    output_tokens=FixedLength(100),
    rng=np.random.default_rng(8),
    warmup_requests=60,
)
out["closed"] = fp(simulate(cl, scheduler, fast))
out["closed noskip"] = fp(simulate(cl, scheduler, fast, skip_decode_runs=False))
out["closed linear"] = fp(
    simulate(cl, scheduler, linear, overheads=ClientOverheads(preprocess_s=0.002))
)
transfer = KVTransfer(latency_s=0.002, bandwidth_bytes_per_s=25e9, kv_bytes_per_token=131072)
w = wl(600, 20.0, 9, ln=True)
out["disagg"] = fp(
    simulate_disaggregated(
        w,
        prefill=small(),
        decode=scheduler,
        prefill_step_time=fast,
        decode_step_time=fast,
        transfer=transfer,
    )
)
out["disagg 2x2"] = fp(
    simulate_disaggregated(
        w,
        prefill=small(),
        decode=small(),
        prefill_step_time=fast,
        decode_step_time=linear,
        transfer=transfer,
        prefill_replicas=2,
        decode_replicas=2,
    )
)
out["rr4"] = fp(simulate(wl(1000, 3 * sat, 10, ln=True), scheduler, fast, replicas=4))
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
if len(sys.argv) > 2:
    ref = json.loads(Path(sys.argv[2]).read_text())
    bad = [k for k in ref if ref[k] != out.get(k)]
    print("compared", len(ref), "DIFFER:", bad if bad else "none")
else:
    print(len(out), "fingerprints")
