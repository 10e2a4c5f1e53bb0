"""Request traces: replayed inline or from a file's text (``traffic.trace``), uploaded and
stored (``POST /v1/traces``), then referred to (``traffic.trace_id``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from servesize.schemas.base import RequestModel, ResponseModel

__all__ = [
    "MAX_LENGTH_TOKENS",
    "MAX_REQUESTS",
    "MAX_TRACE_FILE_CHARS",
    "TokenCount",
    "TokenStatsOut",
    "TraceFormatIn",
    "TraceIn",
    "TraceOut",
    "TraceUpload",
]

MAX_REQUESTS = 50_000
"""Most requests one simulation may ask for: the run happens inside the HTTP request."""
MAX_LENGTH_TOKENS = 2**24
MAX_TRACE_FILE_CHARS = 8_000_000
"""About 50,000 rows of a CSV or Mooncake JSONL trace."""
TokenCount = Annotated[int, Field(ge=1, le=MAX_LENGTH_TOKENS)]
TraceFormatIn = Literal["csv", "jsonl", "azure", "vllm"]
TRACE_ID_PATTERN = r"^trc_[0-9a-f]{16}$"


class _In(RequestModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


class TraceIn(RequestModel):
    """A trace to replay, inline (``arrival_s``, ``input_tokens``, ``output_tokens``, equal
    lengths, times in order and ``>= 0``) or as a file's text (``file`` with ``format``):
    ``jsonl`` is the Mooncake trace, ``{"timestamp": ms, "input_length": n, "output_length":
    m}`` per line, or ``{"arrival_s": s, "input_tokens": n, "output_tokens": m}``; ``csv`` has
    a header with ``arrival_s`` or ``timestamp`` (seconds or a date and time),
    ``input_tokens`` (or ``input_length``, ``ContextTokens``) and ``output_tokens`` (or
    ``output_length``, ``GeneratedTokens``); ``azure`` is Azure's LLM inference trace
    (``TIMESTAMP,ContextTokens,GeneratedTokens``); ``vllm`` the JSON of ``vllm bench serve
    --save-result --save-detailed`` (``input_lens``, ``output_lens``, ``start_times``; failed
    requests left out). File times are shifted to start at 0. At most 50,000 requests."""

    arrival_s: list[Annotated[float, Field(ge=0, le=10**9)]] | None = Field(
        default=None, max_length=MAX_REQUESTS, examples=[[0.0, 0.1, 0.25, 0.4]]
    )
    """Send time of each request in seconds, in order."""
    input_tokens: list[TokenCount] | None = Field(
        default=None, max_length=MAX_REQUESTS, examples=[[512, 2048, 128, 1024]]
    )
    """Prompt tokens of each request."""
    output_tokens: list[TokenCount] | None = Field(
        default=None, max_length=MAX_REQUESTS, examples=[[64, 256, 32, 128]]
    )
    """Output tokens of each request."""
    format: TraceFormatIn | None = Field(default=None, examples=["jsonl"])
    """Format of ``file``."""
    file: str | None = Field(
        default=None,
        max_length=MAX_TRACE_FILE_CHARS,
        examples=['{"timestamp": 0, "input_length": 655, "output_length": 52}\n'],
    )
    """The trace file's text."""

    @model_validator(mode="after")
    def _one_form(self) -> TraceIn:
        arrays = (self.arrival_s, self.input_tokens, self.output_tokens)
        inline = any(a is not None for a in arrays)
        if inline == (self.file is not None):
            raise ValueError(
                "give either arrival_s, input_tokens and output_tokens, or file with format"
            )
        if inline and any(a is None for a in arrays):
            raise ValueError("an inline trace needs arrival_s, input_tokens and output_tokens")
        if self.file is not None and self.format is None:
            raise ValueError("give the file's format: csv, jsonl, azure or vllm")
        return self


class TraceUpload(_In):
    """A trace file to store: its text and format (as ``traffic.trace``), and a name."""

    format: TraceFormatIn = Field(examples=["azure"])
    """``csv``, ``jsonl`` (Mooncake or plain), ``azure`` or ``vllm`` (see ``traffic.trace``)."""
    file: str = Field(
        min_length=1,
        max_length=MAX_TRACE_FILE_CHARS,
        examples=["TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"],
    )
    """The file's text (the request body is also bounded by the server's body limit)."""
    name: str | None = Field(default=None, min_length=1, max_length=200, examples=["azure-conv"])
    """A label for people; not unique."""


class TokenStatsOut(ResponseModel):
    """Token counts over the trace's requests."""

    mean: float = Field(examples=[512.4])
    p50: float = Field(examples=[388.0])
    p90: float = Field(examples=[1313.0])
    p99: float = Field(examples=[4081.0])
    min: int = Field(examples=[2])
    max: int = Field(examples=[4107])


class TraceOut(ResponseModel):
    """A stored trace's summary. ``duration_s`` is the first to the last send;
    ``rate_per_s`` is ``(requests − 1) / duration_s`` (null when every request is sent at
    once), the rate a replay offers."""

    id: str = Field(examples=["trc_5f0c3a9e1b2d4c6f"])
    name: str | None = Field(examples=["azure-conv"])
    format: str = Field(examples=["azure"])
    created_at: datetime
    size_bytes: int = Field(examples=[2_048])
    requests: int = Field(examples=[8])
    duration_s: float = Field(examples=[8.251431])
    rate_per_s: float | None = Field(examples=[0.848])
    input_tokens: TokenStatsOut
    output_tokens: TokenStatsOut
