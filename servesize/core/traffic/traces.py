"""Request traces: read a trace file's text into send times and lengths, and check a trace.

Formats:

* ``jsonl`` — one object per line: the Mooncake trace (``kvcache-ai/Mooncake:
  mooncake_trace.jsonl``, replayed by AIPerf and Dynamo), ``{"timestamp": ms, "input_length":
  n, "output_length": m, ...}`` with the timestamp in milliseconds, or the plain form
  ``{"arrival_s": s, "input_tokens": n, "output_tokens": m}`` in seconds; other keys
  (``hash_ids``) are ignored.
* ``csv`` — a header row, then one row per request. The send time is ``arrival_s`` or
  ``timestamp`` (seconds, as BurstGPT's ``Timestamp``, or a date and time such as
  ``2023-11-16 18:15:46.6805900``); the lengths are ``input_tokens`` / ``input_length`` /
  ``Request tokens`` / ``ContextTokens`` and ``output_tokens`` / ``output_length`` /
  ``Response tokens`` / ``GeneratedTokens``. Header names are matched without case.
* ``azure`` — the Azure LLM inference traces (``Azure/AzurePublicDataset:
  data/AzureLLMInferenceTrace_{conv,code}.csv``): ``TIMESTAMP,ContextTokens,GeneratedTokens``
  with date-time stamps (read as the ``csv`` format; fractions below a microsecond dropped).
* ``vllm`` — the JSON file ``vllm bench serve --save-result --save-detailed`` writes
  (``vllm/benchmarks/serve.py``: ``benchmark`` → ``result``): ``input_lens`` and
  ``output_lens`` per request; send times from ``start_times`` (``time.perf_counter()`` at each
  send) where present, else equal gaps of ``1 / request_rate``, else (``"inf"``) all at 0 as
  vLLM sends them. Requests with a non-empty ``errors`` entry were not served and are left out.

File times are shifted so that the first request is sent at 0. Rows must be in send order
(a vLLM file is sorted by its start times).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import numpy as np

TraceFormat = Literal["csv", "jsonl", "azure", "vllm"]
TRACE_FORMATS: tuple[TraceFormat, ...] = ("csv", "jsonl", "azure", "vllm")

_TIME_COLUMNS = ("arrival_s", "timestamp")
_INPUT_COLUMNS = ("input_tokens", "input_length", "request tokens", "contexttokens")
_OUTPUT_COLUMNS = ("output_tokens", "output_length", "response tokens", "generatedtokens")

_Rows = tuple[list[float], list[float], list[float], list[int]]
"""Send times, input and output lengths, and the file line of each request."""


class TraceError(ValueError):
    """A trace that cannot be replayed: ``field`` (``arrival_s``, ``input_tokens``,
    ``output_tokens`` or ``file``) and ``index`` (request index, or file line from 1) say where."""

    def __init__(self, message: str, *, field: str, index: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.index = index


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """Send times (seconds) and lengths of a replayed workload, in send order."""

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    @property
    def size(self) -> int:
        """Number of requests."""
        return int(self.arrival_s.size)


def check_trace(
    arrival_s: np.ndarray, input_tokens: np.ndarray, output_tokens: np.ndarray
) -> Trace:
    """Refuse a trace whose arrays differ in length, whose times are negative, not finite or
    out of order, or whose lengths are not integers ``>= 1`` (the first offender is named)."""
    times = np.asarray(arrival_s, dtype=np.float64)
    if times.ndim != 1 or times.size == 0:
        raise TraceError("the trace needs at least one request", field="arrival_s")
    for name, values in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        if np.asarray(values).shape != times.shape:
            raise TraceError(
                f"{name} has {np.asarray(values).size} entries, arrival_s has {times.size}",
                field=name,
            )
    bad = np.flatnonzero(~np.isfinite(times))
    if bad.size:
        i = int(bad[0])
        raise TraceError("send times must be finite", field="arrival_s", index=i)
    early = np.flatnonzero(np.diff(times) < 0)
    if early.size:
        i = int(early[0]) + 1
        raise TraceError(
            f"send times must be in order: {times[i]} s comes after {times[i - 1]} s",
            field="arrival_s",
            index=i,
        )
    if times[0] < 0:
        raise TraceError(f"send time {times[0]} must be >= 0", field="arrival_s", index=0)
    lengths = []
    for name, values in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        arr = np.asarray(values, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(arr) | (arr < 1) | (arr != np.rint(arr)))
        if bad.size:
            i = int(bad[0])
            raise TraceError(f"{name} must be an integer >= 1, got {arr[i]}", field=name, index=i)
        lengths.append(arr.astype(np.int64))
    return Trace(arrival_s=times, input_tokens=lengths[0], output_tokens=lengths[1])


def _number(text: object, what: str, line: int) -> float:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TraceError(
            f"line {line}: {what} {text!r} is not a number", field="file", index=line
        ) from None
    if not math.isfinite(value):
        raise TraceError(f"line {line}: {what} must be finite", field="file", index=line)
    return value


def _time(text: str, what: str, line: int) -> float:
    """Seconds, or a date and time (ISO 8601; naive ones read as UTC) as seconds since 1970."""
    try:
        return _number(text, what, line)
    except TraceError:
        pass
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise TraceError(
            f"line {line}: {what} {text!r} is neither seconds nor a date and time",
            field="file",
            index=line,
        ) from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def _column(header: list[str], names: tuple[str, ...]) -> int:
    lowered = [h.strip().lower() for h in header]
    for name in names:
        if name in lowered:
            return lowered.index(name)
    raise TraceError(
        f"line 1: the header needs one of the columns {', '.join(names)} (got {', '.join(header)})",
        field="file",
        index=1,
    )


def _rows_csv(text: str, max_rows: int) -> _Rows:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise TraceError("the file is empty", field="file")
    cols = (
        _column(header, _TIME_COLUMNS),
        _column(header, _INPUT_COLUMNS),
        _column(header, _OUTPUT_COLUMNS),
    )
    t: list[float] = []
    n_in: list[float] = []
    n_out: list[float] = []
    lines: list[int] = []
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(t) >= max_rows:
            raise TraceError(f"more than {max_rows} requests", field="file", index=line)
        if len(row) <= max(cols):
            raise TraceError(
                f"line {line}: expected {len(header)} columns", field="file", index=line
            )
        t.append(_time(row[cols[0]], header[cols[0]], line))
        n_in.append(_number(row[cols[1]], header[cols[1]], line))
        n_out.append(_number(row[cols[2]], header[cols[2]], line))
        lines.append(line)
    return t, n_in, n_out, lines


def _key(record: dict[str, object], names: tuple[str, ...], line: int) -> str:
    for name in names:
        if name in record:
            return name
    raise TraceError(f"line {line}: {' or '.join(names)} is missing", field="file", index=line)


def _rows_jsonl(text: str, max_rows: int) -> _Rows:
    t: list[float] = []
    n_in: list[float] = []
    n_out: list[float] = []
    lines: list[int] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if len(t) >= max_rows:
            raise TraceError(f"more than {max_rows} requests", field="file", index=line)
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TraceError(
                f"line {line}: not JSON ({exc.msg})", field="file", index=line
            ) from None
        if not isinstance(record, dict):
            raise TraceError(f"line {line}: expected an object", field="file", index=line)
        when = _key(record, ("timestamp", "arrival_s"), line)
        scale = 1000.0 if when == "timestamp" else 1.0  # Mooncake: milliseconds
        n_key = _key(record, ("input_length", "input_tokens"), line)
        m_key = _key(record, ("output_length", "output_tokens"), line)
        t.append(_number(record[when], when, line) / scale)
        n_in.append(_number(record[n_key], n_key, line))
        n_out.append(_number(record[m_key], m_key, line))
        lines.append(line)
    return t, n_in, n_out, lines


def _list(doc: dict[str, object], key: str, size: int | None) -> list[object]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise TraceError(
            f"{key} must be a list (save the run with --save-detailed)", field="file", index=1
        )
    if size is not None and len(value) != size:
        raise TraceError(
            f"{key} has {len(value)} entries, input_lens has {size}", field="file", index=1
        )
    return value


def _rows_vllm(text: str, max_rows: int) -> _Rows:
    """A ``vllm bench serve --save-detailed`` result (module docstring); the "line" of a
    request is its index in ``input_lens`` plus one."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(
            f"line {exc.lineno}: not JSON ({exc.msg})", field="file", index=exc.lineno
        ) from None
    if not isinstance(doc, dict):
        raise TraceError("expected a JSON object", field="file", index=1)
    n_in = _list(doc, "input_lens", None)
    size = len(n_in)
    if size > max_rows:
        raise TraceError(f"more than {max_rows} requests", field="file", index=max_rows + 1)
    n_out = _list(doc, "output_lens", size)
    errors = _list(doc, "errors", size) if "errors" in doc else [""] * size
    if "start_times" in doc:
        t = [
            _number(v, "start_times", i + 1) for i, v in enumerate(_list(doc, "start_times", size))
        ]
    else:
        rate = doc.get("request_rate", "inf")
        gap = 0.0 if rate == "inf" else 1.0 / _number(rate, "request_rate", 1)
        t = [i * gap for i in range(size)]
    keep = [i for i in range(size) if not errors[i]]
    keep.sort(key=lambda i: t[i])
    return (
        [t[i] for i in keep],
        [_number(n_in[i], "input_lens", i + 1) for i in keep],
        [_number(n_out[i], "output_lens", i + 1) for i in keep],
        [i + 1 for i in keep],
    )


def trace_format_of(name: str) -> TraceFormat:
    """The format a file name suggests: ``.jsonl`` Mooncake/plain JSONL, ``.json`` a vLLM
    result, anything else CSV (which reads Azure's traces too)."""
    lowered = name.lower()
    if lowered.endswith(".jsonl"):
        return "jsonl"
    if lowered.endswith(".json"):
        return "vllm"
    return "csv"


def parse_trace(text: str, fmt: TraceFormat, *, max_rows: int) -> Trace:
    """A trace file's text as a checked :class:`Trace` (times shifted to start at 0).

    Examples
    --------
    >>> tr = parse_trace('{"timestamp": 500, "input_length": 8, "output_length": 2}\\n'
    ...                  '{"timestamp": 1500, "input_length": 9, "output_length": 3}', "jsonl",
    ...                  max_rows=10)
    >>> tr.arrival_s.tolist(), tr.input_tokens.tolist()
    ([0.0, 1.0], [8, 9])
    """
    if fmt in ("csv", "azure"):
        t, n_in, n_out, lines = _rows_csv(text, max_rows)
    elif fmt == "jsonl":
        t, n_in, n_out, lines = _rows_jsonl(text, max_rows)
    elif fmt == "vllm":
        t, n_in, n_out, lines = _rows_vllm(text, max_rows)
    else:
        raise TraceError(f"unknown trace format {fmt!r}", field="format")
    if not t:
        raise TraceError("the file holds no request", field="file")
    times = np.asarray(t, dtype=np.float64)
    try:
        return check_trace(times - times[0], np.asarray(n_in), np.asarray(n_out))
    except TraceError as exc:
        line = lines[exc.index] if exc.index is not None else None
        where = f"line {line}" if fmt != "vllm" else f"request {line}"
        raise TraceError(f"{where}: {exc}", field="file", index=line) from None
