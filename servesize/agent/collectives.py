"""All-reduce timing across the local GPUs: one spawned process per GPU (torch.distributed,
NCCL/RCCL). Kept apart from the single-device probe because it needs its own processes.

Method, after ``stas00/ml-engineering:network/benchmarks/all_reduce_bench.py`` (which agrees
closely with ``nccl-tests -z 1``): per message size, ``warmup`` untimed all-reduces, then
``repeats`` times a barrier followed by one all-reduce bracketed by CUDA events. Each rank
takes its median; the slowest rank's median is the collective's time (a collective finishes
when its last rank does). Bus bandwidth is derived in :mod:`servesize.agent.bench`.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

BF16_BYTES = 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def all_reduce_sweep_s(
    *, world_size: int, message_bytes: Sequence[int], repeats: int, warmup: int = 5
) -> list[float]:
    """Seconds per bf16 all-reduce of each message size across ``world_size`` local GPUs."""
    if world_size < 2:
        raise ValueError(f"an all-reduce needs at least 2 GPUs, got {world_size}")
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(tmp) / "all_reduce_s.json"
        mp.spawn(
            _worker,
            args=(world_size, list(message_bytes), repeats, warmup, _free_port(), str(out_path)),
            nprocs=world_size,
            join=True,
        )
        return [float(t) for t in json.loads(out_path.read_text())]


def _worker(
    rank: int,
    world_size: int,
    message_bytes: list[int],
    repeats: int,
    warmup: int,
    port: int,
    out_path: str,
) -> None:
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    try:
        times_s: list[float] = []
        for nbytes in message_bytes:
            tensor = torch.randn(max(1, nbytes // BF16_BYTES), dtype=torch.bfloat16, device="cuda")
            for _ in range(warmup):
                dist.all_reduce(tensor)
            torch.cuda.synchronize()
            samples_s = []
            for _ in range(repeats):
                dist.barrier()
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                dist.all_reduce(tensor)
                end.record()
                end.synchronize()
                samples_s.append(float(start.elapsed_time(end)) / 1e3)
            slowest = torch.tensor([statistics.median(samples_s)], device="cuda")
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            times_s.append(float(slowest.item()))
        if rank == 0:
            Path(out_path).write_text(json.dumps(times_s))
    finally:
        dist.destroy_process_group()
