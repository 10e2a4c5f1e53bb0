"""Serving engines as the step-time model sees them: scheduling limits and fitted overheads.

Each engine gets the scheduler limits it uses by default on an 80 GB Hopper GPU (sources next
to each profile) and six fitted constants:

=========================== ========== ========== ============================================
constant                    vLLM       TRT-LLM    meaning
=========================== ========== ========== ============================================
step_overhead_s             2.17 ms    1.57 ms    CPU per step: schedule, prepare, sample
eager_overhead_per_layer_s  4.5 µs     54.6 µs    launch cost per layer of an un-graphed step
request_overhead_s          32.6 ms    141.6 ms   per request outside the step loop
compute_slowdown            1.13       1.10       in-engine / isolated time, compute-bound
memory_slowdown             0.917      0.700      same, memory-bound (TRT-LLM: at the bound)
arrival_clumping            0.111      0.0546     share of clients returning in phase
=========================== ========== ========== ============================================

How they were fitted: :func:`servesize.calibration.fit_engine_constants` (``python -m
bench.accuracy --fit``) on the aggregated rows of ``servesize/data/h100/e2e_serving.csv``
(H100 SXM, aiconfigurator-core 0.12.0) whose model is in the catalogue and whose KV cache
holds all ``C`` requests: 103 vLLM rows (Llama-3.1-70B FP8, gpt-oss-120b) and 309 TensorRT-LLM
rows (Llama-3.1-8B, Qwen3-235B-A22B FP8, gpt-oss-120b). Nelder-Mead on the logarithms, inside
``servesize.calibration.FITTED_BOUNDS``, minimising TTFT MAPE + TPOT MAPE, one engine at a
time, never per model, with the measured kernel tables in use, so the constants describe what
isolated kernels do not. Two readings: TensorRT-LLM's large request overhead is its serving
front-end and first-token path (Qwen3-235B at concurrency 4 shows a 174 ms TTFT for a 512-token
prompt whose prefill the tables put at 50 ms); its memory slowdown sits at the 0.7 bound
because the isolated FP8 GEMM table carries ~13 µs of activation quantisation and launch per
call that the engine fuses or overlaps. SGLang has no rows for catalogue models, so it
borrows vLLM's constants and reports them as defaults.

``engine_profile(name, calibrated=False)`` keeps the scheduler limits and neutralises every
fitted constant (no overhead, slowdowns 1): the plain roofline.

The simulator (Tier B: ``/v1/simulate``, the SLO search and sizing verification) costs steps
with a second set, fitted through the simulator replaying each row's benchmark
(:data:`SIMULATOR_ENGINE_PROFILES`; :func:`simulator_constants` swaps it into a stock profile):
vLLM 2.20 ms per step, 6.4 µs per eager layer, 23.0 ms per request, compute 1.24, memory 0.91;
TensorRT-LLM 1.62 ms, 202 µs, 6.0 ms, 1.02, 0.70; SGLang borrows vLLM's. The steady-state
request overheads above are larger because they also absorb the prompt queueing that the
simulator produces itself. A request overhead belongs to the front-end it was fitted behind:
vLLM's behind ``vllm serve`` (Python), TensorRT-LLM's behind Dynamo's Rust front-end, which the
replay of vLLM and SGLang rows served through Dynamo borrows
(:func:`servesize.calibration.simulated.request_overhead_s`).

Both tiers now step with the simulator's set: :func:`servesize.core.replica.compile_replica`
applies :func:`simulator_constants` to every replica's step model, and Tier A follows the
simulator's scheduling rules (docs/modeling.md §2.13). The steady-state set above remains the
starting point of the fits and a reference in ``python -m bench.accuracy --simulate``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "ENGINE_PROFILES",
    "FITTED_FIELDS",
    "KNOWN_ENGINES",
    "SIMULATOR_ENGINE_PROFILES",
    "EngineProfile",
    "engine_profile",
    "simulator_constants",
    "simulator_engine_profile",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineProfile:
    """Scheduling limits and fitted overheads of one serving engine."""

    name: str
    max_num_batched_tokens: int
    """Token budget of one step (prefill chunks + decodes)."""
    max_num_seqs: int
    """Most sequences in one step."""
    kv_reservation: str
    """``incremental`` (blocks allocated as sequences grow: vLLM, SGLang) or ``full``
    (prompt + output reserved at admission: TensorRT-LLM's ``GUARANTEED_NO_EVICT``)."""
    cuda_graph_max_tokens: int
    """Largest step replayed from a captured CUDA graph."""
    cuda_graph_decode_only: bool
    """True when only decode-only steps are captured (prefill and mixed steps run eagerly)."""
    step_overhead_s: float
    """CPU time per step outside kernels: scheduling, input preparation, sampling, output
    processing (fitted)."""
    eager_overhead_per_layer_s: float
    """Kernel-launch time per layer when a step runs eagerly (no CUDA graph)."""
    request_overhead_s: float
    """Per request, outside the step loop: HTTP, tokenisation, detokenisation and streaming of
    the first token (fitted)."""
    compute_slowdown: float = 1.0
    """Kernel compute time inside a forward pass over isolated-kernel time (fitted)."""
    memory_slowdown: float = 1.0
    """Same, for memory-bound kernels (fitted)."""
    arrival_clumping: float = 0.0
    """Fraction of the other resident clients whose requests arrive together with a given one
    (fitted): closed-loop clients with equal lengths finish, and so return, in phase. 0 is
    Poisson-like arrivals; 1 is lock-step waves."""
    calibrated: bool = False
    """True when the constants above were fitted to this engine's own measurements."""
    provenance: str = "neutral constants: plain roofline"


def _uncalibrated(profile: EngineProfile) -> EngineProfile:
    return replace(
        profile,
        step_overhead_s=0.0,
        eager_overhead_per_layer_s=0.0,
        request_overhead_s=0.0,
        compute_slowdown=1.0,
        memory_slowdown=1.0,
        arrival_clumping=0.0,
        calibrated=False,
        provenance="neutral constants: plain roofline",
    )


# vLLM on GPUs with >= 70 GiB (not A100): max_num_batched_tokens 8192, max_num_seqs 1024
# (vllm-project/vllm:vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults); piecewise
# CUDA graphs cover every step up to 512 tokens (the default upper capture size).
_VLLM = EngineProfile(
    name="vllm",
    max_num_batched_tokens=8192,
    max_num_seqs=1024,
    kv_reservation="incremental",
    cuda_graph_max_tokens=512,
    cuda_graph_decode_only=False,
    step_overhead_s=2.17e-3,
    eager_overhead_per_layer_s=4.5e-6,
    request_overhead_s=32.6e-3,
    compute_slowdown=1.13,
    memory_slowdown=0.917,
    arrival_clumping=0.111,
    calibrated=True,
    provenance="fitted on 103 vLLM rows (Llama-3.1-70B FP8, gpt-oss-120b)",
)

# SGLang on H100: chunked_prefill_size 8192; its CUDA-graph runner captures decode batches up
# to 160 sequences below 80 GB of free memory (256 above); requests hold KV blocks
# incrementally (radix cache). The fitted constants are vLLM's.
_SGLANG = replace(
    _VLLM,
    name="sglang",
    cuda_graph_max_tokens=160,
    cuda_graph_decode_only=True,
    calibrated=False,
    provenance="borrowed from vLLM: no SGLang rows for catalogue models",
)

# TensorRT-LLM (PyTorch flow): max_num_tokens 8192 (BuildConfig default, as
# ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/sdk/backends/trtllm_backend.py
# records), max_batch_size 2048, capacity scheduler GUARANTEED_NO_EVICT; only generation-only
# batches run from CUDA graphs, context steps run eagerly.
_TRTLLM = EngineProfile(
    name="trtllm",
    max_num_batched_tokens=8192,
    max_num_seqs=2048,
    kv_reservation="full",
    cuda_graph_max_tokens=2048,
    cuda_graph_decode_only=True,
    step_overhead_s=1.57e-3,
    eager_overhead_per_layer_s=54.6e-6,
    request_overhead_s=141.6e-3,
    compute_slowdown=1.10,
    memory_slowdown=0.700,
    arrival_clumping=0.0546,
    calibrated=True,
    provenance="fitted on 309 TensorRT-LLM rows (Llama-3.1-8B, Qwen3-235B-A22B FP8, gpt-oss-120b)",
)

ENGINE_PROFILES: dict[str, EngineProfile] = {p.name: p for p in (_VLLM, _SGLANG, _TRTLLM)}
"""Calibrated profiles by engine name."""

KNOWN_ENGINES: tuple[str, ...] = tuple(ENGINE_PROFILES)

# The simulator (Tier B) replays each benchmark request by request
# (servesize/calibration/simulated.py), so it needs no clumping constant, and the aggregated rows
# of aiconfigurator's sweep run under the deployment that was measured (a step holds one whole
# prompt or a few, not 8192 tokens). The constants above were fitted through the steady-state
# estimate, whose request overhead absorbs the prompt queueing the simulator produces itself;
# the simulator's are refitted through it (servesize.calibration.fitting.fit_simulator_constants,
# Nelder-Mead on TTFT MAPE + TPOT MAPE; ``python -m bench.accuracy --simulate`` prints both sets).
# TensorRT-LLM, with the overlap scheduler's one-step output delay
# (SchedulerConfig.output_delay_steps; refitted from the previous simulator constants on every
# second replayable row, then from there on all 308 of them): 1.62 ms per step, 202 µs launch
# per layer of an eager (context) step, 6.0 ms per request outside the engine, compute 1.02 and
# memory 0.70 of the isolated tables. The mean-field fit's 142 ms per request absorbed the prompt
# queueing that the simulator now produces itself.
_TRTLLM_SIM = replace(
    _TRTLLM,
    step_overhead_s=1.62e-3,
    eager_overhead_per_layer_s=202e-6,
    request_overhead_s=6.01e-3,
    compute_slowdown=1.017,
    memory_slowdown=0.701,
    arrival_clumping=0.0,
    provenance=(
        "fitted through the simulator on TensorRT-LLM rows (Llama-3.1-8B, "
        "Qwen3-235B-A22B FP8, gpt-oss-120b), each replayed as its benchmark ran"
    ),
)

# vLLM, from the mean-field constants on all 103 replayable rows (60 evaluations): 2.20 ms per
# step, 6.4 µs launch per layer of an un-graphed step, 23.0 ms per request, compute 1.24 and
# memory 0.91 of the isolated tables (TTFT / TPOT MAPE 19.9 / 8.1 % -> 17.5 / 7.9 % on those
# rows).
_VLLM_SIM = replace(
    _VLLM,
    step_overhead_s=2.20e-3,
    eager_overhead_per_layer_s=6.41e-6,
    request_overhead_s=22.95e-3,
    compute_slowdown=1.242,
    memory_slowdown=0.911,
    arrival_clumping=0.0,
    provenance=(
        "fitted through the simulator on 103 vLLM rows (Llama-3.1-70B FP8, gpt-oss-120b), "
        "each replayed as its benchmark ran"
    ),
)

# SGLang borrows vLLM's simulator constants, as its steady-state profile borrows vLLM's.
_SGLANG_SIM = replace(
    _VLLM_SIM,
    name="sglang",
    cuda_graph_max_tokens=_SGLANG.cuda_graph_max_tokens,
    cuda_graph_decode_only=_SGLANG.cuda_graph_decode_only,
    calibrated=False,
    provenance="borrowed from vLLM's simulator constants: no SGLang rows for catalogue models",
)

SIMULATOR_ENGINE_PROFILES: dict[str, EngineProfile] = {
    p.name: p for p in (_VLLM_SIM, _SGLANG_SIM, _TRTLLM_SIM)
}
"""Profiles for the simulator path (Tier B), fitted through the simulator.
``arrival_clumping`` plays no part in a simulation."""

FITTED_FIELDS: tuple[str, ...] = (
    "step_overhead_s",
    "eager_overhead_per_layer_s",
    "request_overhead_s",
    "compute_slowdown",
    "memory_slowdown",
    "arrival_clumping",
)
"""The fitted constants of a profile (the rest are scheduler limits and labels)."""


def simulator_constants(profile: EngineProfile) -> EngineProfile:
    """``profile`` with its engine's simulator constants in place of the steady-state ones when
    it carries its engine's stock fitted constants (scheduler limits kept); any other profile
    (neutral roofline, user-made) unchanged.

    >>> p = simulator_constants(engine_profile("trtllm"))
    >>> round(p.request_overhead_s * 1e3, 2), p.max_num_batched_tokens
    (6.01, 8192)
    >>> simulator_constants(engine_profile("vllm", calibrated=False)).request_overhead_s
    0.0
    """
    stock = ENGINE_PROFILES.get(profile.name)
    sim = SIMULATOR_ENGINE_PROFILES.get(profile.name)
    if stock is None or sim is None:
        return profile
    if any(getattr(profile, f) != getattr(stock, f) for f in FITTED_FIELDS):
        return profile
    fitted = {f: getattr(sim, f) for f in FITTED_FIELDS}
    return replace(profile, provenance=sim.provenance, **fitted)


def engine_profile(name: str, *, calibrated: bool = True) -> EngineProfile:
    """The profile of engine ``name`` (``vllm``, ``sglang``, ``trtllm``).

    >>> engine_profile("vllm", calibrated=False).step_overhead_s
    0.0
    """
    key = name.strip().lower().replace("-", "").replace("_", "")
    key = {"tensorrtllm": "trtllm", "trtllm": "trtllm"}.get(key, key)
    if key not in ENGINE_PROFILES:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(KNOWN_ENGINES)}")
    profile = ENGINE_PROFILES[key]
    return profile if calibrated else _uncalibrated(profile)


def simulator_engine_profile(name: str) -> EngineProfile:
    """The profile of engine ``name`` for the simulator (:data:`SIMULATOR_ENGINE_PROFILES`).

    >>> sim, steady = simulator_engine_profile("vllm"), engine_profile("vllm")
    >>> sim.request_overhead_s < steady.request_overhead_s
    True
    """
    return SIMULATOR_ENGINE_PROFILES[engine_profile(name).name]
