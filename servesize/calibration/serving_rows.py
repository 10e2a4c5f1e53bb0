"""Load measured end-to-end serving rows (``e2e_serving.csv``) into plain records.

Each row is one benchmark: ``concurrency`` closed-loop clients with fixed ``input_tokens`` and
``output_tokens``, mean TTFT and TPOT over requests. Aggregated rows (``mode == "agg"``) ran one
engine instance of ``tensor_parallel_size × attention_data_parallel_size`` GPUs; disaggregated
rows ran separate prefill and decode pools.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from servesize.calibration.kernel_tables import H100_DATA_DIRECTORY

__all__ = ["E2E_SERVING_CSV", "ServingMeasurement", "load_serving_measurements"]

E2E_SERVING_CSV = H100_DATA_DIRECTORY / "e2e_serving.csv"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingMeasurement:
    """One measured serving benchmark (times in seconds)."""

    row_id: str
    engine: str
    engine_version: str
    model: str
    """Hugging Face id as benchmarked (may be a fine-tune or re-quantization of a catalogue
    model)."""
    precision: str
    """``fp8``/``fp4`` for quantized weights, ``""`` for the checkpoint's own dtype."""
    mode: str
    input_tokens: int
    output_tokens: int
    concurrency: int | None
    tensor_parallel_size: int | None
    pipeline_parallel_size: int | None
    attention_data_parallel_size: int | None
    expert_tensor_parallel_size: int | None
    expert_parallel_size: int | None
    ttft_s: float
    tpot_s: float
    source: str = ""
    """The row's provenance note (``silicon_data_source``): which sweep measured it."""
    system: str = ""
    """The GPU system it ran on (``h100_sxm``)."""


def _int(value: str) -> int | None:
    value = value.strip()
    return None if not value else round(float(value))


def _concurrency(row: dict[str, str]) -> int | None:
    direct = _int(row["batch_size"])
    if direct is not None:
        return direct
    found = re.search(r"silicon_concurrency=(\d+)", row["silicon_data_source"])
    return int(found.group(1)) if found else None


def load_serving_measurements(path: Path = E2E_SERVING_CSV) -> tuple[ServingMeasurement, ...]:
    """Every row of ``path``; milliseconds become seconds, blank sizes become None."""
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return tuple(
        ServingMeasurement(
            row_id=row["id"],
            engine=row["backend"],
            engine_version=row["backend_version"],
            model=row["model_path"],
            precision=row["precision"],
            mode=row["mode"],
            input_tokens=int(row["isl"]),
            output_tokens=int(row["osl"]),
            concurrency=_concurrency(row),
            tensor_parallel_size=_int(row["tp_size"]),
            pipeline_parallel_size=_int(row["pp_size"]),
            attention_data_parallel_size=_int(row["attention_dp_size"]),
            expert_tensor_parallel_size=_int(row["moe_tp_size"]),
            expert_parallel_size=_int(row["moe_ep_size"]),
            ttft_s=float(row["silicon_ttft_ms"]) / 1e3,
            tpot_s=float(row["silicon_tpot_ms"]) / 1e3,
            source=row["silicon_data_source"],
            system=row.get("system", ""),
        )
        for row in rows
    )
