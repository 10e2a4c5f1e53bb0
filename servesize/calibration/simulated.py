"""Closed-loop serving rows replayed through the simulator (Tier B), the way they were measured.

Each aggregated row of ``e2e_serving.csv`` is the mean TTFT and TPOT of one benchmark run at
concurrency ``C``. The rows come from two sweeps whose clients behave differently
(:func:`benchmark_client` tells them apart by the row's provenance note):

* **InferenceMAX-style sweeps** (the vLLM rows of Llama-3.1-70B, gpt-oss-120b and MiniMax-M2.5,
  ISL/OSL 1k/1k, 1k/8k, 8k/1k): vLLM's ``benchmark_serving.py --dataset-name random
  --random-range-ratio 0.8 --num-prompts 10·C --max-concurrency C --request-rate inf
  --ignore-eos`` (SemiAnalysisAI/InferenceMAX ``benchmarks/benchmark_lib.sh``,
  ``benchmarks/gptoss_fp4_h100.sh``). Every request is created at ``t = 0`` and gated by a
  semaphore of ``C``, so the first ``C`` requests reach an idle server together and queue
  behind each other's prefills; the mean is over **all** ``10·C`` requests, that first wave
  included (warm-up requests, when asked for, run and finish before the measured run). Prompt
  and output lengths are drawn uniformly from ``[⌊0.8·L⌋, L]`` (``utils/bench_serving/
  benchmark_serving.py: sample_random_requests``), which also keeps the clients out of step.
  The server ran with ``--max-num-batched-tokens 8192`` and ``--max-num-seqs C``.
* **aiconfigurator's own sweep** (``aic-auto-gap-analysis``: the TensorRT-LLM rows, and the
  vLLM and SGLang rows of Qwen3-32B): ``genai-perf
  --concurrency C --request-count 10·C --warmup-request-count 2·C`` with fixed lengths
  (``ai-dynamo/aiconfigurator:src/aiconfigurator/eval/benchmarks/genai_perf_runner.py``),
  against a worker configured by aiconfigurator's generator. For TensorRT-LLM:
  ``max_num_tokens = max_batch_size + ISL + 1500`` rounded up to the 32-token KV block and
  chunked prefill off (``generator/rule_plugin/trtllm.rule``; the PyTorch flow's default), with
  ``max_batch_size`` taken as ``C``. So a step holds the running decodes and whole prompts
  that fit in ``ISL + 1500`` tokens — one prompt per step from ISL 1500 on — not 8192 tokens.
  The same rule leaves the overlap scheduler on for aggregated serving
  (``disable_overlap_scheduler: false``): the executor launches step ``k + 1`` before it reads
  step ``k``'s tokens (``tensorrt_llm/_torch/pyexecutor/py_executor.py:
  _executor_loop_overlap``), so each token reaches the client one step late and a finished
  request takes part in one more step (``SchedulerConfig.output_delay_steps = 1``).
  For vLLM the generator's benchmark rule (``generator/rule_plugin/benchmark/vllm.rule``) gives
  the same budget without the block rounding, ``max_num_tokens = max_batch_size + ISL + 1500``,
  with chunked prefill and no overlap scheduler (``vllm_v1`` policy, no output delay). The
  0.12.0 CLI template (``backend_templates/vllm/cli_args.0.12.0.j2``) does not pass
  ``--max-num-batched-tokens``, so the server may have run vLLM's default of 8192 instead. The
  replay keeps the rule's budget; ``python -m bench.accuracy --simulate`` prints the errors
  under both (TTFT MAPE 18.7 % under the rule's, 93 % under 8192, over 87 Qwen3-32B rows).
  For SGLang the rule (``…/benchmark/sglang.rule``) sets ``max_prefill_tokens = ISL + 1500``,
  ``max_running_requests = C`` and ``enable_mixed_chunk = true``, but the CLI templates of
  0.5.1.post1 and the default template (used for 0.5.8.post1) only pass the flag when a key
  ``enable-mix-chunk`` is set, while the parameter mapping
  (``generator/config/backend_config_mapping.yaml``) names it ``enable-mixed-chunk``: the flag
  is never passed, and SGLang runs its default scheduler (``prefill_first`` policy: a step of
  prefills whenever one can run, up to ``ISL + 1500`` prompt tokens, the decodes waiting;
  ``scheduler.py: get_next_batch_to_run``). The 0.5.6.post2 template spells it as the mapping
  does (:func:`sglang_mixes_chunks`); those rows run mixed steps (``vllm_v1``, budget
  ``C + ISL + 1500``). SGLang's overlap loop hands a batch's tokens to the client while the
  next batch runs (up to one engine step later); that delay is not modelled.
  The warm-up requests run as a phase of their own; the measured ``10·C`` start together on a
  drained server, like InferenceMAX's. (The source does not settle whether the measured phase
  follows the warm-up without a gap; the rows at ``C = 128``, whose mean TTFT carries the first
  wave's one-prompt-per-step staircase, side with a fresh start.)

Client count. A row's ``batch_size`` is the client concurrency in most sweeps, but not in all:
the TensorRT-LLM gpt-oss-120b rows (1.3.0rc1) record ``batch_size`` per attention-DP rank and the
client count in their provenance (``silicon_concurrency = batch_size × TP``: 48 × 4 = 192,
160 × 2 = 320). The replay therefore drives :func:`client_concurrency` clients (the recorded
``silicon_concurrency``) against ``ranks = clients / batch_size`` scheduler ranks of
``batch_size`` requests each, pooled into one simulated engine (each rank's token budget and
batch added up; the step time is the row's TP-sharded model, which splits attention work over the
same GPUs as attention DP does). A row whose provenance records no client count (the
1.2.0rc6.post1 sweep, where ``batch_size`` is the server's batch, not the client count — its
Qwen3-235B row waits 29 s for a first token, which no closed loop of 28 clients over a 28-request
batch can) is not replayed: :func:`replayable` says which.

The per-request overhead (HTTP, tokenisation, first-token streaming) is spent outside the engine
before the request reaches the queue: it is part of every TTFT and of every client's cycle
(:class:`servesize.core.simulation.ClientOverheads`). It belongs to the front-end, not to the
engine: the InferenceMAX rows ran behind the engine's own Python server (``vllm serve``), while
aiconfigurator's generated ``run.sh`` puts every engine behind Dynamo's Rust front-end
(``python -m dynamo.frontend`` with ``dynamo.vllm`` / ``dynamo.sglang`` / ``dynamo.trtllm``
workers; ``backend_templates/<engine>/run.sh.j2``). The vLLM profile's overhead is fitted behind
``vllm serve`` (23 ms), TensorRT-LLM's behind Dynamo (6.0 ms); the vLLM and SGLang rows of
aiconfigurator's sweep take Dynamo's figure (:func:`request_overhead_s`), which none of them was
fitted on. (The overhead also sets where a returning client lands on the step grid, so the
closed loop's TTFT depends on it more than its size suggests: with vLLM's 23 ms those rows are
replayed 57 % high, with the front-end's 6 ms 11 % high.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from servesize.calibration.cases import Group, ServingCase
from servesize.core.simulation import (
    ClientOverheads,
    SchedulerConfig,
    engine_capacity_policy,
    simulate,
)
from servesize.core.simulation.adapters import steptime_adapter
from servesize.core.simulation.config import SchedulingPolicy
from servesize.core.steptime import EngineProfile, StepTimeModel
from servesize.core.steptime.serving import closed_loop, resident_capacity
from servesize.core.steptime.wave import WAVE_POLICIES, lockstep_loop
from servesize.core.traffic import FixedLength, LengthDistribution, UniformLength
from servesize.core.traffic.workload import ClosedLoopWorkload, closed_loop_workload

__all__ = [
    "AICONFIGURATOR_EVAL",
    "BLOCK_SIZE_TOKENS",
    "INFERENCEMAX",
    "BenchmarkClient",
    "benchmark_client",
    "benchmark_workload",
    "client_concurrency",
    "lockstep_cases",
    "replay_scheduler",
    "replayable",
    "request_overhead_s",
    "scheduler_ranks",
    "sglang_mixes_chunks",
    "simulate_cases",
]

BLOCK_SIZE_TOKENS = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkClient:
    """How a sweep's benchmark client and server launch drove one row (module docstring)."""

    name: str
    requests_per_client: int
    """Measured requests per client: ``num_prompts = requests_per_client · C``."""
    warmup_per_client: int
    """Unmeasured requests per client sent before them in the same closed loop (0 when the
    benchmark's warm-up is a phase of its own that drains before the measured run)."""
    length_range_ratio: float
    """Lengths uniform on ``[⌊ratio·L⌋, L]``; 1 is fixed lengths."""
    generated_token_budget: bool
    """True: aiconfigurator's generated deployment (``C + ISL + 1500`` tokens a step; TensorRT-LLM
    without chunked prefill, vLLM and SGLang with it); False: the engine profile's own budget,
    chunked prefill."""
    dynamo_frontend: bool = False
    """True: the server was Dynamo's front-end (``python -m dynamo.frontend``: HTTP,
    tokenisation, detokenisation and streaming in Rust) in front of a ``dynamo.<engine>``
    worker, as aiconfigurator's generated ``run.sh`` launches every engine; False: the engine's
    own OpenAI server (``vllm serve``). The per-request overhead is the front-end's
    (:func:`request_overhead_s`)."""
    overlap_scheduler: bool = False
    """True: a TensorRT-LLM server ran its overlap scheduler (aiconfigurator's TensorRT-LLM rule
    sets ``disable_overlap_scheduler = false`` for aggregated serving): every token reaches the
    client one of the request's steps later (``SchedulerConfig.output_delay_steps = 1``). Other
    engines have none."""


INFERENCEMAX = BenchmarkClient(
    name="vllm benchmark_serving (InferenceMAX sweep)",
    requests_per_client=10,
    warmup_per_client=0,
    length_range_ratio=0.8,
    generated_token_budget=False,
)
AICONFIGURATOR_EVAL = BenchmarkClient(
    name="genai-perf (aiconfigurator sweep)",
    requests_per_client=10,
    warmup_per_client=0,
    length_range_ratio=1.0,
    generated_token_budget=True,
    dynamo_frontend=True,
    overlap_scheduler=True,
)

_BUDGET_SLACK_TOKENS = 1500
_TRTLLM_TOKENS_PER_BLOCK = 32


def benchmark_client(case: ServingCase) -> BenchmarkClient:
    """The client that measured ``case``: aiconfigurator's sweep for rows whose provenance
    names it, InferenceMAX's otherwise.

    >>> from servesize.calibration.serving_rows import load_serving_measurements
    >>> rows = {r.model: r for r in load_serving_measurements() if r.mode == "agg"}
    >>> "aic-auto-gap-analysis" in rows["meta-llama/Llama-3.1-8B-Instruct"].source
    True
    """
    return AICONFIGURATOR_EVAL if "aic-auto-gap-analysis" in case.row.source else INFERENCEMAX


_CLIENTS = re.compile(r"silicon_concurrency=(\d+)")


def client_concurrency(case: ServingCase) -> int | None:
    """Clients the benchmark ran: the provenance's ``silicon_concurrency``, or None
    (the gpt-oss-120b TensorRT-LLM row ``…c192_tp4…``: 192, over a ``batch_size`` of 48)."""
    found = _CLIENTS.search(case.row.source)
    return int(found.group(1)) if found else None


def replayable(case: ServingCase) -> bool:
    """True when the row records its client count (module docstring)."""
    return client_concurrency(case) is not None


def scheduler_ranks(case: ServingCase) -> int:
    """Attention-DP scheduler ranks behind the row's ``batch_size``: ``clients / batch_size``
    when the row records its batch per rank (a whole multiple above 1), else 1."""
    clients = client_concurrency(case)
    batch = case.row.concurrency
    if clients is None or batch is None or clients <= batch or clients % batch:
        return 1
    return clients // batch


def _lengths(nominal: int, ratio: float) -> LengthDistribution:
    low = max(math.floor(nominal * ratio), 1)
    return FixedLength(nominal) if low >= nominal else UniformLength(low, nominal)


def benchmark_workload(
    case: ServingCase, client: BenchmarkClient, rng: np.random.Generator
) -> ClosedLoopWorkload:
    """``C`` clients, all starting at ``t = 0``, sending ``(k_warm + k)·C`` requests back to
    back; the first ``k_warm·C`` are not measured."""
    row = case.row
    clients = client_concurrency(case) or row.concurrency or 1
    warmup = client.warmup_per_client * clients
    return closed_loop_workload(
        clients=clients,
        num_requests=warmup + client.requests_per_client * clients,
        input_tokens=_lengths(row.input_tokens, client.length_range_ratio),
        output_tokens=_lengths(row.output_tokens, client.length_range_ratio),
        rng=rng,
        warmup_requests=warmup,
    )


_SGLANG_MIXED_CHUNK_VERSIONS = frozenset({"0.5.6.post2"})


def sglang_mixes_chunks(version: str | None) -> bool:
    """Whether aiconfigurator's generator launched SGLang ``version`` with
    ``--enable-mixed-chunk`` (module docstring): only the versions whose CLI template renders
    the flag under the name the parameter mapping gives it.

    >>> sglang_mixes_chunks("0.5.1.post1"), sglang_mixes_chunks("0.5.6.post2")
    (False, True)
    """
    return version in _SGLANG_MIXED_CHUNK_VERSIONS


def replay_scheduler(
    case: ServingCase, model: StepTimeModel, kv_tokens: float, client: BenchmarkClient
) -> SchedulerConfig:
    """Scheduler limits of the deployment that was measured (module docstring)."""
    row = case.row
    ranks = scheduler_ranks(case)
    dp = model.inventory.data_parallel_size * ranks
    batch = row.concurrency or 1
    trtllm = row.engine == "trtllm"
    if client.generated_token_budget:
        sglang_unmixed = row.engine == "sglang" and not sglang_mixes_chunks(row.engine_version)
        tokens = row.input_tokens + _BUDGET_SLACK_TOKENS
        if not sglang_unmixed:
            tokens += batch  # the running decodes share the step's budget
        if trtllm:
            tokens = -(-tokens // _TRTLLM_TOKENS_PER_BLOCK) * _TRTLLM_TOKENS_PER_BLOCK
        budget = tokens * dp
        seqs = batch * dp
        policy: SchedulingPolicy = (
            "no_chunking" if trtllm else "prefill_first" if sglang_unmixed else "vllm_v1"
        )
    else:
        budget = model.engine.max_num_batched_tokens * dp
        seqs = model.engine.max_num_seqs * dp
        policy = "vllm_v1"
    return SchedulerConfig(
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        block_size_tokens=BLOCK_SIZE_TOKENS,
        num_kv_blocks=max(int(kv_tokens) // BLOCK_SIZE_TOKENS, 1),
        policy=policy,
        output_delay_steps=1 if client.overlap_scheduler and trtllm else 0,
        capacity_policy=engine_capacity_policy(row.engine),
    )


_FRONTEND_FITTED_ON = "trtllm"


def request_overhead_s(
    case: ServingCase, model: StepTimeModel, profiles: Mapping[str, EngineProfile] | None
) -> float:
    """Per-request overhead (HTTP, tokenisation, first-token streaming) of the front-end that
    served ``case``: the engine profile's own behind the engine's server, and behind Dynamo's
    front-end the overhead fitted through it, on the TensorRT-LLM rows (every one of them ran
    behind it) — so vLLM and SGLang rows of the same sweep take the front-end's figure rather
    than the one fitted behind ``vllm serve``. Without a TensorRT-LLM profile in ``profiles``
    (or for TensorRT-LLM rows themselves) the row's own engine profile answers. (A fit of vLLM
    or SGLang constants on rows served through Dynamo would therefore not move their overhead;
    the vLLM fit uses the InferenceMAX rows, served by ``vllm serve``.)
    """
    own = model.engine.request_overhead_s
    if not benchmark_client(case).dynamo_frontend or profiles is None:
        return own
    frontend = profiles.get(_FRONTEND_FITTED_ON)
    if frontend is None or case.row.engine == _FRONTEND_FITTED_ON:
        return own
    return frontend.request_overhead_s


def simulate_cases(
    cases: Sequence[ServingCase],
    models: Mapping[Group, tuple[StepTimeModel, float]],
    profiles: Mapping[str, EngineProfile] | None = None,
    *,
    seed: int = 0,
    configure: Callable[[ServingCase, SchedulerConfig], SchedulerConfig] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean TTFT and TPOT of each case over its measured requests, in seconds, as the
    benchmark client computes them; ``profiles`` override the compiled engines' constants and
    ``configure`` rewrites a case's :func:`replay_scheduler` (for what-if replays)."""
    ttft = np.empty(len(cases))
    tpot = np.empty(len(cases))
    for i, case in enumerate(cases):
        model, kv_tokens = models[case.group]
        if profiles is not None and case.row.engine in profiles:
            model = model.with_engine(profiles[case.row.engine])
        client = benchmark_client(case)
        workload = benchmark_workload(case, client, np.random.default_rng(seed))
        config = replay_scheduler(case, model, kv_tokens, client)
        if configure is not None:
            config = configure(case, config)
        result = simulate(
            workload,
            config,
            steptime_adapter(model),
            overheads=ClientOverheads(preprocess_s=request_overhead_s(case, model, profiles)),
        )
        summary = result.summary()
        ttft[i] = summary.ttft_completed_s.mean
        tpot[i] = summary.tpot_completed_s.mean
    return ttft, tpot


def lockstep_cases(
    cases: Sequence[ServingCase],
    models: Mapping[Group, tuple[StepTimeModel, float]],
    profiles: Mapping[str, EngineProfile] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Tier A's mean TTFT and TPOT of each case under the deployment and client the replay
    uses (:func:`replay_scheduler`, :func:`benchmark_workload`, :func:`request_overhead_s`):
    the lock-step loop of ``C`` clients at the mean lengths, every request of the benchmark
    measured from a cold start as the client measures them
    (:func:`~servesize.core.steptime.wave.lockstep_loop`); where lengths are drawn from a range
    (which puts the clients out of step) or the KV cache holds fewer than ``C`` sequences, the
    mean-field closed loop, with the lock-step loop's first wave where it applies."""
    ttft = np.empty(len(cases))
    tpot = np.empty(len(cases))
    for i, case in enumerate(cases):
        model, kv_tokens = models[case.group]
        if profiles is not None and case.row.engine in profiles:
            model = model.with_engine(profiles[case.row.engine])
        client = benchmark_client(case)
        config = replay_scheduler(case, model, kv_tokens, client)
        clients = client_concurrency(case) or case.row.concurrency or 1
        low = max(math.floor(case.row.input_tokens * client.length_range_ratio), 1)
        p = round((low + case.row.input_tokens) / 2)
        low = max(math.floor(case.row.output_tokens * client.length_range_ratio), 1)
        n = round((low + case.row.output_tokens) / 2)
        overhead = request_overhead_s(case, model, profiles)
        held = resident_capacity(
            model, input_tokens=p, output_tokens=n, kv_capacity_tokens=kv_tokens
        )[0]
        fits = clients <= min(held, config.max_num_seqs)
        loop = (
            lockstep_loop(
                model,
                clients=clients,
                input_tokens=p,
                output_tokens=n,
                policy=WAVE_POLICIES[config.policy],
                overhead_s=overhead,
                output_delay_steps=config.output_delay_steps,
                budget_tokens=config.max_num_batched_tokens,
                max_num_seqs=config.max_num_seqs,
                requests_per_client=client.requests_per_client,
                warmup_per_client=0,
            )
            if fits
            else None
        )
        k = client.requests_per_client
        if loop is not None and client.length_range_ratio >= 1.0:
            ttft[i], tpot[i] = loop.ttft_s, loop.tpot_s
            continue
        # Lengths drawn from a range put the clients out of step after their first request:
        # the mean-field closed loop (no clumping), with the first wave (every client's first
        # request, from an idle engine) taken from the lock-step loop.
        est = closed_loop(
            model.with_engine(
                replace(model.engine, request_overhead_s=overhead, arrival_clumping=0.0)
            ),
            concurrency=clients,
            input_tokens=p,
            output_tokens=n,
            kv_capacity_tokens=kv_tokens,
            mean_field=True,
        )
        ttft[i], tpot[i] = float(est.ttft_s[0]), float(est.tpot_s[0])
        if loop is not None:
            ttft[i] = (loop.first_wave_ttft_s + (k - 1) * ttft[i]) / k
    return ttft, tpot
