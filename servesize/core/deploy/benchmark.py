"""A load test for a planned deployment: ``vllm bench serve`` at the plan's rate and lengths.

Flags are those of ``vllm/benchmarks/serve.py: add_cli_args`` (vLLM 0.10 and later):
``--dataset-name random`` with ``--random-input-len``/``--random-output-len`` and
``--ignore-eos`` (every request generates exactly the planned output), ``--request-rate`` with
``--burstiness`` (the gaps are gamma with shape ``burstiness``, so a coefficient of variation
``cv`` is ``burstiness = 1 / cv²``; Poisson is 1), ``--num-warmups`` (requests sent and
discarded before the timed run), and ``--percentile-metrics ttft,tpot,itl,e2el
--metric-percentiles 50,90,95,99 --save-result``, which writes every percentile
``servesize-agent ingest --format vllm-bench`` reads (``mean``, ``p50`` … ``p99`` of TTFT, TPOT,
ITL and E2E). The tool works against any OpenAI-compatible server, so the same command measures
vLLM, SGLang and ``trtllm-serve`` deployments.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

__all__ = ["BenchmarkJob", "benchmark_script", "vllm_bench_command"]

WARMUP_S = 30.0
"""Warm-up traffic: 30 s of the planned rate (CUDA graphs captured, prefix caches filled)."""
MIN_WARMUPS = 8


@dataclass(frozen=True, slots=True)
class BenchmarkJob:
    """The load a plan was sized for, and how long to hold it."""

    model: str
    base_url: str
    rate_per_s: float
    input_tokens: int
    output_tokens: int
    duration_s: float = 300.0
    cv: float = 1.0
    """Coefficient of variation of the gaps (1: Poisson)."""
    seed: int = 0
    result_file: str = "bench.json"
    gpu_name: str = "unknown"
    """The GPU the upload names (its profile must match it)."""
    gpus: int = 1
    """GPUs behind the endpoint (the whole fleet)."""

    def __post_init__(self) -> None:
        for name in ("rate_per_s", "duration_s", "cv"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: must be a finite number > 0, got {value!r}")
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise ValueError("input_tokens and output_tokens must be >= 1")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url: {self.base_url!r} is not an http(s) URL")

    @property
    def num_prompts(self) -> int:
        """Requests in the timed run: ``ceil(rate × duration)``."""
        return max(1, math.ceil(self.rate_per_s * self.duration_s))

    @property
    def num_warmups(self) -> int:
        """``max(8, ceil(rate × 30 s))``."""
        return max(MIN_WARMUPS, math.ceil(self.rate_per_s * WARMUP_S))

    @property
    def burstiness(self) -> float:
        """vLLM's gamma shape for a gap CV: ``1 / cv²``."""
        return 1.0 / (self.cv * self.cv)


def vllm_bench_command(job: BenchmarkJob) -> list[str]:
    """``vllm bench serve ...`` as an argument list."""
    return [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "openai",
        "--base-url",
        job.base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        job.model,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(job.input_tokens),
        "--random-output-len",
        str(job.output_tokens),
        "--ignore-eos",
        "--num-prompts",
        str(job.num_prompts),
        "--request-rate",
        f"{job.rate_per_s:g}",
        "--burstiness",
        f"{job.burstiness:g}",
        "--num-warmups",
        str(job.num_warmups),
        "--seed",
        str(job.seed),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,95,99",
        "--save-result",
        "--result-filename",
        job.result_file,
    ]


def benchmark_script(job: BenchmarkJob, *, plan_ref: str) -> str:
    """A POSIX shell script: wait for ``/health``, run the load test, convert the result into
    an upload for ``servesize-agent upload``. ``BASE_URL`` and ``GPU_NAME`` in the environment
    override the planned Service address and the GPU name."""
    q = shlex.quote
    argv = [q(a) if a != job.base_url else '"$BASE_URL"' for a in vllm_bench_command(job)]
    lines = [" ".join(argv[:3])]
    for arg in argv[3:]:
        if arg.startswith("--") or not lines[-1].startswith("--"):
            lines.append(arg)
        else:
            lines[-1] += f" {arg}"
    upload = job.result_file + ".upload.json"
    return (
        "#!/bin/sh\n"
        f"# Load test of {plan_ref}: {job.rate_per_s:g} requests/s, {job.input_tokens} prompt and "
        f"{job.output_tokens} output tokens,\n"
        f"# {job.num_prompts} timed requests after {job.num_warmups} warm-up requests.\n"
        "set -eu\n"
        f"BASE_URL=${{BASE_URL:-{q(job.base_url)}}}\n"
        'until curl -fsS "$BASE_URL/health" >/dev/null; do sleep 10; done\n'
        + " \\\n  ".join(lines)
        + "\n"
        f"GPU_NAME=${{GPU_NAME:-{q(job.gpu_name)}}}\n"
        f'servesize-agent ingest --format vllm-bench --gpu-name "$GPU_NAME" '
        f"--gpu-count {job.gpus} --out {q(upload)} {q(job.result_file)}\n"
    )
