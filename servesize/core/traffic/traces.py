"""Request traces: read a trace file's text into send times and lengths, and check a trace.

Two formats, both one request per row:

* ``jsonl`` — the Mooncake trace (``kvcache-ai/Mooncake: mooncake_trace.jsonl``, replayed by
  AIPerf and Dynamo): ``{"timestamp": ms, "input_length": n, "output_length": m, ...}``, the
  timestamp in milliseconds since the first request; other keys (``hash_ids``) are ignored.
* ``csv`` — a header row, then one row per request. The send time is ``arrival_s`` or
  ``timestamp`` (seconds, as BurstGPT's ``Timestamp``); the lengths are ``input_tokens`` /
  ``input_length`` / ``Request tokens`` and ``output_tokens`` / ``output_length`` /
  ``Response tokens``. Header names are matched without case.

File times are shifted so that the first request is sent at 0. Rows must be in send order.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

TraceFormat = Literal["csv", "jsonl"]

_TIME_COLUMNS = ("arrival_s", "timestamp")
_INPUT_COLUMNS = ("input_tokens", "input_length", "request tokens")
_OUTPUT_COLUMNS = ("output_tokens", "output_length", "response tokens")


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


def _rows_csv(text: str, max_rows: int) -> tuple[list[float], list[float], list[float]]:
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
        t.append(_number(row[cols[0]], header[cols[0]], line))
        n_in.append(_number(row[cols[1]], header[cols[1]], line))
        n_out.append(_number(row[cols[2]], header[cols[2]], line))
    return t, n_in, n_out


def _rows_jsonl(text: str, max_rows: int) -> tuple[list[float], list[float], list[float]]:
    t: list[float] = []
    n_in: list[float] = []
    n_out: list[float] = []
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
        for key in ("timestamp", "input_length", "output_length"):
            if key not in record:
                raise TraceError(f"line {line}: {key} is missing", field="file", index=line)
        t.append(_number(record["timestamp"], "timestamp", line) / 1000.0)
        n_in.append(_number(record["input_length"], "input_length", line))
        n_out.append(_number(record["output_length"], "output_length", line))
    return t, n_in, n_out


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
    if fmt == "csv":
        t, n_in, n_out = _rows_csv(text, max_rows)
    elif fmt == "jsonl":
        t, n_in, n_out = _rows_jsonl(text, max_rows)
    else:
        raise TraceError(f"unknown trace format {fmt!r}", field="format")
    if not t:
        raise TraceError("the file holds no request", field="file")
    times = np.asarray(t, dtype=np.float64)
    try:
        return check_trace(times - times[0], np.asarray(n_in), np.asarray(n_out))
    except TraceError as exc:
        # Point at the file line: request i is the (i + 1)-th data row.
        raise TraceError(f"request {exc.index}: {exc}", field="file", index=exc.index) from None
