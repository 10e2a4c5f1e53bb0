"""Convert result files of other benchmark tools into an :class:`EndpointBenchmark`.

Their metric names collide with different meanings, so every field is mapped explicitly. Our
definitions (docs/modeling.md §4.2):
``ttft_s``; ``tpot_s`` = per-request (E2E − TTFT)/(N − 1), excluding the first token;
``itl_s`` = gaps between streamed chunks, pooled over requests; ``e2e_s``; all in seconds.

- ttft_s ← vllm ``*_ttft_ms``; GuideLLM ``time_to_first_token_ms``; AIPerf
  ``time_to_first_token`` (``ttft`` in 0.1); inference-perf / llm-d ``time_to_first_token``;
- tpot_s ← vllm ``*_tpot_ms``; GuideLLM ``inter_token_latency_ms``; AIPerf
  ``inter_token_latency``; inference-perf / llm-d ``time_per_output_token``;
- itl_s (chunk gaps) ← vllm ``*_itl_ms``; GuideLLM none; AIPerf ``inter_chunk_latency``;
  inference-perf / llm-d ``inter_token_latency``;
- e2e_s ← vllm ``*_e2el_ms``; GuideLLM ``request_latency`` (s); AIPerf, inference-perf and
  llm-d ``request_latency``.

GuideLLM's ``time_per_output_token_ms`` is E2E / N (it *includes* the first token) and is
deliberately not used; its ``inter_token_latency_ms`` is our TPOT. AIPerf's
``inter_token_latency`` is our TPOT too; its chunk gaps are ``inter_chunk_latency``.
inference-perf's ``inter_token_latency`` pools per-token gaps (tokens of one chunk share the
chunk's arrival time, so intra-chunk gaps are 0): the closest it has to chunk gaps.

A percentile a file does not carry is stored as ``None`` (:attr:`LatencyStats.absent`) and
:func:`gaps` says what the tool would need to produce it; only a file that lacks what every
level needs (counts, duration, any latency) is refused, naming the field.
"""

from servesize.agent.ingest.aiperf import from_aiperf, from_aiperf_csv, from_aiperf_records
from servesize.agent.ingest.common import PERCENTILES, IngestError, IngestFormat, gaps
from servesize.agent.ingest.files import ingest_files, read_json_records
from servesize.agent.ingest.guidellm import from_guidellm
from servesize.agent.ingest.reports import from_inference_perf, from_llmd_report
from servesize.agent.ingest.vllm import from_vllm_bench

__all__ = [
    "PERCENTILES",
    "IngestError",
    "IngestFormat",
    "from_aiperf",
    "from_aiperf_csv",
    "from_aiperf_records",
    "from_guidellm",
    "from_inference_perf",
    "from_llmd_report",
    "from_vllm_bench",
    "gaps",
    "ingest_files",
    "read_json_records",
]
