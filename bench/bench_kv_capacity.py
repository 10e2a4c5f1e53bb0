"""vLLM KV capacity against collected start-up logs.

``python -m bench.bench_kv_capacity`` plans every log of
``servesize/data/validation/vllm_startup_logs.json`` with the release, GPU and settings it
records and prints, per log, what vLLM printed against the plan: weights, activation peak,
"Available KV cache memory", "GPU KV cache size" (tokens) and "Maximum concurrency", each with
its relative error. The logs are independent measurements used for judging only; rows marked
``fit`` are runs some memory constants were fitted on (``calibration_overlap``) and are
summarised apart. Where a log gives the CUDA total ("total_gpu_memory", "Free memory on
device x/y GiB") it replaces the datasheet-derived total, as a measured device would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec
from servesize.core.memory import DEFAULT_CONSTANTS, GIB, Deployment, MemoryPlan, plan_memory

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "servesize" / "data" / "validation" / "vllm_startup_logs.json"
MODELS = ROOT / "servesize" / "data" / "models"


@dataclass(frozen=True, slots=True)
class Comparison:
    """One logged figure against the plan's."""

    log_id: str
    quantity: str
    measured: float
    predicted: float
    calibration_overlap: bool

    @property
    def error(self) -> float:
        """``predicted / measured - 1``."""
        return self.predicted / self.measured - 1.0


def load_logs(path: Path = LOGS) -> list[dict[str, Any]]:
    """The collected logs, as stored."""
    logs: list[dict[str, Any]] = json.loads(path.read_text())["logs"]
    return logs


def architecture(log: dict[str, Any]) -> Architecture:
    """The model of one log: a catalogue config (with overrides) or the config it carries."""
    if "config" in log:
        config: dict[str, Any] = dict(log["config"])
    else:
        config = json.loads((MODELS / log["catalogue_file"]).read_text())
    config.update(log.get("config_overrides", {}))
    if "quantization_config" in log:
        config["quantization_config"] = log["quantization_config"]
    return parse_architecture(config, name=log["model"])


def plan_log(log: dict[str, Any]) -> MemoryPlan:
    """Plan the deployment a log records, on its GPU."""
    hardware = HardwareSpec(
        id=log["gpu"].lower().replace(" ", "-"),
        vendor="NVIDIA",
        name=log["gpu"],
        memory_bytes=int(log["gpu_memory_gib"] * GIB),
        memory_bandwidth_bytes_per_s=1,
    )
    constants = DEFAULT_CONSTANTS
    if log.get("device_total_gib") is not None:
        constants = replace(constants, device_total_bytes=round(log["device_total_gib"] * GIB))
    deployment = Deployment(
        tensor_parallel_size=log["tensor_parallel_size"],
        max_model_len=log.get("max_model_len"),
        gpu_memory_utilization=log.get("gpu_memory_utilization"),
        max_num_seqs=log.get("max_num_seqs"),
        max_num_batched_tokens=log.get("max_num_batched_tokens"),
        block_size=log.get("block_size"),
        kv_cache_dtype=log.get("kv_cache_dtype", "auto"),
        engine_version=log["engine_version"],
        mxfp4_backend=log.get("mxfp4_backend"),
    )
    return plan_memory(architecture(log), hardware, deployment, constants=constants)


def _concurrency(plan: MemoryPlan, tokens: int) -> float:
    if tokens == plan.max_model_len:
        return plan.max_concurrency
    blocks = plan.layout.blocks_per_request(tokens)
    return plan.kv_blocks / blocks if blocks else 0.0


def compare(log: dict[str, Any]) -> list[Comparison]:
    """Every figure the log has, against the plan's."""
    plan = plan_log(log)
    logged = log["logged"]
    overlap = bool(log.get("calibration_overlap", False))
    predicted = {
        "weights_gib": plan.weights_bytes_per_gpu / GIB,
        "activation_gib": plan.activation_bytes_per_gpu / GIB,
        "available_kv_gib": plan.kv_available_bytes_per_gpu / GIB,
        "kv_tokens": float(plan.kv_capacity_tokens),
        "max_concurrency": _concurrency(plan, logged.get("concurrency_tokens", plan.max_model_len)),
    }
    return [
        Comparison(log["id"], name, float(logged[name]), value, overlap)
        for name, value in predicted.items()
        if logged.get(name) is not None
    ]


def comparisons(path: Path = LOGS) -> list[Comparison]:
    """All comparisons over all logs."""
    return [c for log in load_logs(path) for c in compare(log)]


_SHORT = {
    "weights_gib": "weights GiB",
    "activation_gib": "activation GiB",
    "available_kv_gib": "KV GiB",
    "kv_tokens": "KV tokens",
    "max_concurrency": "concurrency",
}


def print_report(rows: list[Comparison]) -> None:
    """One line per logged figure, then the largest error of each kind."""
    header = f"{'log':50} {'quantity':15} {'measured':>12} {'predicted':>12} {'diff':>10}"
    print(f"{header} {'error':>8}")
    for row in rows:
        tag = " (fit)" if row.calibration_overlap else ""
        print(
            f"{row.log_id + tag:50} {_SHORT[row.quantity]:15} {row.measured:12,.2f} "
            f"{row.predicted:12,.2f} {row.predicted - row.measured:+10,.2f} {row.error:+8.1%}"
        )
    print()
    for overlap, label in ((False, "independent logs"), (True, "logs used in calibration")):
        for quantity, short in _SHORT.items():
            errors = [
                abs(r.error)
                for r in rows
                if r.quantity == quantity and r.calibration_overlap == overlap
            ]
            if errors:
                print(
                    f"{label:26} {short:15} n={len(errors):2}  max |error| {max(errors):6.1%}  "
                    f"mean {sum(errors) / len(errors):6.1%}"
                )


def main() -> None:
    print_report(comparisons())


if __name__ == "__main__":
    main()
