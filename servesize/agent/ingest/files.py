"""Reading result files (JSON, JSON Lines, YAML, AIPerf CSV) and dispatching them by format."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servesize.agent.ingest.aiperf import from_aiperf, from_aiperf_csv, from_aiperf_records
from servesize.agent.ingest.common import IngestError, IngestFormat
from servesize.agent.ingest.guidellm import from_guidellm
from servesize.agent.ingest.reports import from_inference_perf, from_llmd_report
from servesize.agent.ingest.vllm import from_vllm_bench
from servesize.schemas.measurements import EndpointBenchmark


def _load_yaml(text: str, path: Path) -> Any:
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        raise IngestError(f"{path}: reading YAML needs PyYAML (pip install pyyaml)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise IngestError(f"{path}: not valid YAML ({exc})") from exc


def read_json_records(path: Path) -> list[Any]:
    """A JSON document, JSON Lines (one object per line, as ``--append-result`` writes), or
    YAML for ``.yaml``/``.yml`` files."""
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        data = _load_yaml(text, path)
        return data if isinstance(data, list) else [data]
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise IngestError(f"{path}: neither JSON nor JSON Lines ({exc})") from exc
    return data if isinstance(data, list) else [data]


AIPERF_SUMMARY = "profile_export_aiperf.json"


def _aiperf_summary_beside(path: Path) -> Mapping[str, Any] | None:
    """The ``profile_export_aiperf.json`` of the same run (AIPerf writes it into the same
    artifact directory)."""
    candidate = path.with_name(AIPERF_SUMMARY)
    if not candidate.is_file():
        return None
    data = json.loads(candidate.read_text())
    return data if isinstance(data, Mapping) else None


def _is_aiperf_records(path: Path, records: Sequence[Any]) -> bool:
    return path.suffix == ".jsonl" or any(
        isinstance(r, Mapping) and "metrics" in r and "metadata" in r for r in records[:1]
    )


def ingest_files(
    paths: Sequence[Path], fmt: IngestFormat, *, model: str | None = None
) -> EndpointBenchmark:
    """Read one or more result files of one tool into a single benchmark (levels in order).
    AIPerf files may be the summary JSON, the per-record JSONL or the CSV export (one run
    each); the latter two take load and model from the summary JSON beside them."""
    if fmt == "aiperf":
        parts = []
        for path in paths:
            if path.suffix.lower() == ".csv":
                parts.append(
                    from_aiperf_csv(
                        path.read_text(), summary=_aiperf_summary_beside(path), model=model
                    )
                )
                continue
            data = read_json_records(path)
            if _is_aiperf_records(path, data):
                parts.append(
                    from_aiperf_records(data, summary=_aiperf_summary_beside(path), model=model)
                )
            else:
                parts.append(from_aiperf(data, model=model))
        if not parts:
            raise IngestError("no AIPerf files given")
        first = parts[0]
        return first.model_copy(update={"levels": [lv for p in parts for lv in p.levels]})
    records: list[Any] = []
    for path in paths:
        records.extend(read_json_records(path))
    if not all(isinstance(r, Mapping) for r in records):
        raise IngestError("every result must be a JSON object")
    if fmt == "vllm-bench":
        return from_vllm_bench(records, model=model)
    if fmt == "inference-perf":
        return from_inference_perf(records, model=model)
    if fmt == "llm-d":
        return from_llmd_report(records, model=model)
    return from_guidellm(records, model=model)
