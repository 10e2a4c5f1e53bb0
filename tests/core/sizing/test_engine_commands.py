"""Every launch command of a sizing parses under its engine's own option table, with the planned
knobs and the engines' cross-flag rules.

The option tables (``servesize/data/engine_options/``) were extracted from the released
packages (vLLM 0.21.0 and SGLang 0.5.1 wheels, sglang_router 0.1.9) and from TensorRT-LLM's
source by ``bench/engine_options.py``. The parser built here from a table has the engine's
flags, types, choices, ``nargs`` and actions, and no prefix matching (``allow_abbrev=False``:
``--tp`` for ``--tp-size`` would fail). The rules checked come from the engines' sources:

- SGLang ``tp_size == ep_size · moe_dp_size · moe_tp_size`` (experts over EP ranks, the rest
  tensor-parallel), ``tp_size % dp_size == 0`` under DP attention (``ServerArgs.__post_init__``);
- vLLM ``max_num_batched_tokens >= max_num_seqs`` (``SchedulerConfig._verify_args``);
- ``TP · PP · DP`` = the replica's GPUs (SGLang/TensorRT-LLM: attention DP inside ``tp_size``);
- TensorRT-LLM's YAML keys exist in its ``LlmArgs`` classes.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import servesize
from servesize.core.architecture import Architecture, parse_architecture, summarize
from servesize.core.memory import KV_CACHE_DTYPES
from servesize.core.sizing import (
    LaunchCommand,
    Plan,
    SearchSpace,
    SizingResult,
    SizingTraffic,
    shell_command,
    size,
)
from servesize.core.slo import LatencyTarget, ServiceLevelObjective
from servesize.core.traffic import FixedLength
from tests.core.sizing.fixtures import GPUS

OPTIONS = Path(servesize.__file__).parent / "data" / "engine_options"
MODELS = Path(servesize.__file__).parent / "data" / "models"
H100 = GPUS["h100-sxm"]
GPUS_PER_NODE = 8
BUDGET = 8192
CONTEXT = 2048
TRAFFIC = SizingTraffic(
    rate_per_s=1.0, input_tokens=FixedLength(512), output_tokens=FixedLength(128)
)
LOOSE = ServiceLevelObjective(
    targets=(LatencyTarget(metric="ttft", statistic="p95", limit_s=60.0),)
)
# The KV element each requested dtype must reach the engine as (bf16 checkpoints; vLLM
# CacheDType, SGLang's "auto" = the model dtype, TensorRT-LLM's kv_cache_config.dtype).
VLLM_KV = {
    "auto": "bfloat16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_inc": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "int8_per_token_head": "int8_per_token_head",
    "fp8_per_token_head": "fp8_per_token_head",
    "nvfp4": "nvfp4",
    "fp8_ds_mla": "fp8_ds_mla",
}
SGLANG_KV = {
    "auto": "auto",
    "bfloat16": "auto",
    "bf16": "auto",
    "fp8": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "fp8_inc": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
}
TRTLLM_KV = {"auto": "auto", "bfloat16": "auto", "bf16": "auto", "fp8": "fp8", "fp8_e4m3": "fp8"}
TRTLLM_KV["fp8_inc"] = "fp8"
ENGINE_KV = {"vllm": VLLM_KV, "sglang": SGLANG_KV, "trtllm": TRTLLM_KV}


class _RefusedError(ValueError):
    """The parser refused the command line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit
        raise _RefusedError(message)


def _json_arg(text: str) -> Any:
    return json.loads(text)


_TYPES = {"int": int, "float": float, "str": str, "choice": str, "json": _json_arg}


def parser_from(table: str) -> tuple[_Parser, dict[str, Any]]:
    """An argparse parser with the table's options (exact flags only)."""
    doc = json.loads((OPTIONS / table).read_text())
    parser = _Parser(prog=doc["engine"], add_help=False, allow_abbrev=False)
    for spec in doc["options"].values():
        kind = spec.get("kind", "str")
        kwargs: dict[str, Any] = {}
        if kind in ("store_true", "store_false"):
            kwargs["action"] = kind
        elif kind == "bool_optional":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = _TYPES[kind]
            if spec.get("choices"):
                kwargs["choices"] = spec["choices"]
            if spec.get("nargs") is not None:
                kwargs["nargs"] = spec["nargs"]
            if "const" in spec and spec.get("nargs") == "?":
                kwargs["const"] = spec["const"]
            if spec.get("append"):
                kwargs["action"] = "append"
        if "positional" in spec:
            parser.add_argument(spec["positional"], nargs="?", type=str)
            continue
        if "dest" in spec:
            kwargs["dest"] = spec["dest"]
        parser.add_argument(*spec["flags"], **kwargs)
    return parser, doc


VLLM, VLLM_DOC = parser_from("vllm-0.21.0.json")
SGLANG, SGLANG_DOC = parser_from("sglang-0.5.1.json")
ROUTER, ROUTER_DOC = parser_from("sglang-router-0.1.9.json")
TRTLLM, TRTLLM_DOC = parser_from("trtllm-1.0.0.json")


def _arch(name: str) -> Architecture:
    return parse_architecture(json.loads((MODELS / name).read_text()), name=name)


CASES = {
    "dense": "meta-llama--Llama-3.1-8B.json",
    "moe": "Qwen--Qwen3-30B-A3B.json",
    "mla": "deepseek-ai--DeepSeek-V3.json",
}


def _sizing(kind: str, engine: str) -> tuple[SizingResult, bool]:
    arch = _arch(CASES[kind])
    is_moe = summarize(arch).num_experts > 0
    space = SearchSpace(
        hardware=(H100,),
        engines=(engine,),
        tensor_parallel=(1, 8),
        data_parallel=(1, 2),
        expert_parallel=(False, True) if is_moe else (False,),
        max_num_batched_tokens=(BUDGET,),
        # P/D pairs take the last KV dtype: fp8, which every engine stores.
        kv_cache_dtype=(*(k for k in KV_CACHE_DTYPES if k != "fp8"), "fp8"),
        max_model_len=(CONTEXT,),
        disaggregation=True,
    )
    result = size(
        arch,
        model_name="org/model",
        space=space,
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={},
        verify_top=0,
        max_plans=10_000,
    )
    return result, is_moe


_CACHE: dict[tuple[str, str], tuple[SizingResult, bool]] = {}


def sizing(kind: str, engine: str) -> tuple[SizingResult, bool]:
    key = (kind, engine)
    if key not in _CACHE:
        _CACHE[key] = _sizing(kind, engine)
    return _CACHE[key]


def _servers(plan: Plan) -> Iterator[LaunchCommand]:
    assert plan.launch is not None
    yield from (c for c in plan.launch.commands if c.role != "router")


def _parse(parser: _Parser, argv: tuple[str, ...], head: list[str]) -> argparse.Namespace:
    assert list(argv[: len(head)]) == head, argv
    return parser.parse_args(list(argv[len(head) :]))


def _check_vllm(plan: Plan) -> None:
    c, memory = plan.candidate, plan.memory
    servers = list(_servers(plan))
    pools = 2 if c.kind == "disaggregated" else 1
    nodes = math.ceil(c.gpus_per_replica / GPUS_PER_NODE)
    assert len(servers) == pools * nodes
    # a TP x PP group over several nodes: vLLM's multiprocessing executor with --nnodes
    spread = math.ceil(c.tensor_parallel_size * c.pipeline_parallel_size / GPUS_PER_NODE)
    local_total = 0
    for cmd in servers:
        ns = _parse(VLLM, cmd.argv, ["vllm", "serve"])
        assert ns.model_tag == "org/model"
        assert ns.tensor_parallel_size * ns.pipeline_parallel_size * ns.data_parallel_size == (
            c.gpus_per_replica
        )
        assert ns.tensor_parallel_size == c.tensor_parallel_size
        assert ns.enable_expert_parallel is c.enable_expert_parallel
        assert ns.max_num_batched_tokens >= ns.max_num_seqs
        assert ns.max_num_batched_tokens == BUDGET
        assert ns.max_model_len == CONTEXT
        assert ns.kv_cache_dtype == VLLM_KV[c.kv_cache_dtype]
        assert ns.enable_chunked_prefill is True
        assert ns.enable_prefix_caching is True
        # The pinned pool is whole blocks of block_size tokens: the planned token capacity.
        block_bytes = ns.block_size * memory.kv_bytes_per_token_per_gpu
        assert ns.kv_cache_memory_bytes == memory.kv_blocks * block_bytes
        if spread > 1:
            rank = int(cmd.role.rsplit("node", 1)[1])
            pool = "" if c.kind == "aggregated" else cmd.role.split("-")[0].upper() + "_"
            assert ns.data_parallel_size == 1
            assert ns.data_parallel_size_local is None
            assert ns.distributed_executor_backend == "mp"
            assert (ns.nnodes, ns.node_rank) == (spread, rank)
            assert ns.master_addr == f"${pool}MASTER_ADDR"
            assert plan.launch is not None
            assert f"${pool}MASTER_ADDR" in dict(plan.launch.placeholders)
            assert ns.headless is (rank > 0)
        elif nodes > 1:
            rank = int(cmd.role.rsplit("node", 1)[1])
            local = GPUS_PER_NODE // (c.tensor_parallel_size * c.pipeline_parallel_size)
            assert ns.data_parallel_size_local == local
            pool = "" if c.kind == "aggregated" else cmd.role.split("-")[0].upper() + "_"
            assert ns.data_parallel_address == f"${pool}MASTER_ADDR"
            assert plan.launch is not None
            assert f"${pool}MASTER_ADDR" in dict(plan.launch.placeholders)
            assert ns.headless is (rank > 0)
            assert (ns.data_parallel_start_rank or 0) == rank * local
            local_total += local
        if c.kind == "disaggregated":
            assert ns.kv_transfer_config["kv_connector"] == "NixlConnector"
    if nodes > 1 and spread == 1:
        assert local_total == pools * c.data_parallel_size


def _sglang_reserved_mb(total_mb: float, tp: int, pp: int) -> float:
    """SGLang 0.5.1 ``_handle_gpu_memory_settings`` for a 60-160 GB GPU: chunk 8192, CUDA-graph
    batch 256 (TP < 4) or 512; ``512 + 1.5·chunk + 2·bs + TP·PP/8·1024`` MB, at least 10 GiB."""
    graph_bs = 256 if tp < 4 else 512
    return max(512 + 1.5 * 8192 + 2 * graph_bs + tp * pp / 8 * 1024, 10 * 1024)


def _check_sglang(plan: Plan, is_moe: bool) -> None:
    c, memory = plan.candidate, plan.memory
    t, d = c.tensor_parallel_size, c.data_parallel_size
    for cmd in _servers(plan):
        ns = _parse(SGLANG, cmd.argv, ["python", "-m", "sglang.launch_server"])
        tp, dp, pp = ns.tensor_parallel_size, ns.data_parallel_size, ns.pipeline_parallel_size
        ep = ns.expert_parallel_size or 1  # ServerArgs.ep_size defaults to 1
        if is_moe and d > 1:
            # The vLLM layout TP t x DP d of an MoE model: one TP group of t·d GPUs with
            # attention DP d (attention TP t per rank).
            assert ns.enable_dp_attention
            assert tp == t * d
            assert tp % dp == 0
            assert tp // dp == t
            assert tp * pp == c.gpus_per_replica
            assert ns.chunked_prefill_size // dp == BUDGET
        else:
            assert not ns.enable_dp_attention
            assert tp == t
            assert ns.chunked_prefill_size == BUDGET
        moe_dp = 1
        moe_tp = tp // ep
        assert tp == ep * moe_dp * moe_tp
        if is_moe:
            assert moe_tp == (1 if c.enable_expert_parallel else t * d)
        assert ns.context_length == CONTEXT
        assert ns.page_size == 1
        assert ns.kv_cache_dtype == SGLANG_KV[c.kv_cache_dtype]
        assert ns.max_total_tokens == memory.kv_capacity_tokens
        total_mb = memory.device_total_bytes / 2**20
        reserved = _sglang_reserved_mb(total_mb, t, c.pipeline_parallel_size)
        assert ns.mem_fraction_static == round((total_mb - reserved) / total_mb, 3)
        if c.kind == "disaggregated":
            assert ns.disaggregation_mode == cmd.role.split("-")[0]
        if ns.nnodes is not None and ns.nnodes > 1:
            # multi-node: DP attention, or one TP x PP group wider than a node
            assert ns.enable_dp_attention or tp * pp > GPUS_PER_NODE
            assert ns.nnodes == math.ceil(c.gpus_per_replica / GPUS_PER_NODE)
            pool = "" if c.kind == "aggregated" else cmd.role.split("-")[0].upper() + "_"
            assert ns.dist_init_addr == f"${pool}MASTER_ADDR:5000"
            assert ns.node_rank == int(cmd.role.rsplit("node", 1)[1])
    assert plan.launch is not None
    for cmd in plan.launch.commands:
        if cmd.role == "router":
            ns = _parse(ROUTER, cmd.argv, ["python", "-m", "sglang_router.launch_router"])
            if c.kind == "disaggregated":
                assert ns.pd_disaggregation
                assert ns.prefill
                assert ns.decode
            else:
                servers = list(_servers(plan))
                assert len(ns.worker_urls) == len(servers)


def _check_trtllm_yaml(options: dict[str, Any]) -> None:
    classes = TRTLLM_DOC["llm_args"]
    top = set(classes["TorchLlmArgs"]["fields"]) | set(classes["BaseLlmArgs"]["fields"])
    nested = {
        "kv_cache_config": "KvCacheConfig",
        "scheduler_config": "SchedulerConfig",
        "cuda_graph_config": "CudaGraphConfig",
        "cache_transceiver_config": "CacheTransceiverConfig",
    }
    for key, value in options.items():
        assert key in top, key
        if isinstance(value, dict):
            fields = classes[nested[key]]["fields"]
            assert set(value) <= set(fields), set(value) - set(fields)
    policy = options["scheduler_config"]["capacity_scheduler_policy"]
    assert policy in classes["SchedulerConfig"]["enums"]["capacity_scheduler_policy"]


def _check_trtllm(plan: Plan, is_moe: bool) -> None:
    c, memory = plan.candidate, plan.memory
    servers = list(_servers(plan))
    copies = 1 if is_moe else c.data_parallel_size
    pools = 2 if c.kind == "disaggregated" else 1
    assert len(servers) == pools * copies
    # Dense data parallelism: servers sharing a node hold disjoint GPUs and ports.
    if copies > 1:
        seen: dict[tuple[str, str], list[tuple[set[str], str]]] = {}
        for cmd in servers:
            assert cmd.argv[0] == "env"
            devices = set(cmd.argv[1].removeprefix("CUDA_VISIBLE_DEVICES=").split(","))
            port = cmd.argv[cmd.argv.index("--port") + 1]
            pool = cmd.role.rstrip("0123456789").split("-")[0].rstrip("0123456789")
            node = cmd.role.split("-node")[1] if "-node" in cmd.role else "0"
            for other, other_port in seen.get((pool, node), []):
                assert not devices & other
                assert port != other_port
            seen.setdefault((pool, node), []).append((devices, port))
    for cmd in servers:
        argv = cmd.argv[cmd.argv.index("trtllm-serve") :]
        ns = _parse(TRTLLM, argv, ["trtllm-serve"])
        assert ns.model == "org/model"
        world = ns.tensor_parallel_size * ns.pipeline_parallel_size
        assert world * copies == c.gpus_per_replica
        if is_moe:
            assert ns.tensor_parallel_size % ns.moe_expert_parallel_size == 0
        if world > GPUS_PER_NODE:
            assert cmd.argv[:3] == ("mpirun", "-np", str(world))
            assert cmd.argv[cmd.argv.index("trtllm-llmapi-launch") + 1] == "trtllm-serve"
            assert ns.gpus_per_node == GPUS_PER_NODE
        files = dict(cmd.files)
        options = yaml.safe_load(files[ns.extra_llm_api_options])
        _check_trtllm_yaml(options)
        kv = options["kv_cache_config"]
        assert kv["max_tokens"] == memory.kv_capacity_tokens
        assert kv["dtype"] == TRTLLM_KV[c.kv_cache_dtype]
        assert options["enable_attention_dp"] is (is_moe and c.data_parallel_size > 1)
        assert options["enable_chunked_prefill"] is False
        assert options["max_num_tokens"] == ns.max_num_tokens == BUDGET
        assert options["max_seq_len"] == ns.max_seq_len == CONTEXT
        graphs = options["cuda_graph_config"]["batch_sizes"]
        assert max(graphs) <= ns.max_batch_size


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_every_plan_parses_under_its_engine_or_is_rejected(kind: str, engine: str) -> None:
    result, is_moe = sizing(kind, engine)
    # Every candidate became a plan or a rejection with its reason.
    assert len(result.plans) + len(result.rejected) == result.candidates_evaluated
    assert all(r.detail for r in result.rejected)
    for plan in result.plans:
        assert plan.launch is not None
        assert plan.launch.engine == engine
        for cmd in plan.launch.commands:
            # Only the sized engine's commands.
            other = {"vllm": "sglang", "sglang": "trtllm-serve", "trtllm": "vllm"}[engine]
            assert other not in cmd.argv[:4]
            assert shell_command(cmd.argv)
        if engine == "vllm":
            _check_vllm(plan)
        elif engine == "sglang":
            _check_sglang(plan, is_moe)
        else:
            _check_trtllm(plan, is_moe)
    if kind != "mla":
        assert result.plans, f"no {engine} plan for {kind}"


@pytest.mark.parametrize(
    ("engine", "refused"),
    [
        ("vllm", {"float32", "fp32"}),
        (
            "sglang",
            {
                "float32",
                "fp32",
                "float16",
                "fp16",
                "half",
                "int8_per_token_head",
                "fp8_per_token_head",
                "nvfp4",
            },
        ),
        (
            "trtllm",
            {
                "float32",
                "fp32",
                "float16",
                "fp16",
                "half",
                "int8_per_token_head",
                "fp8_per_token_head",
                "nvfp4",
                "fp8_e5m2",
            },
        ),
    ],
)
def test_kv_formats_an_engine_cannot_store_are_rejected_with_the_reason(
    engine: str, refused: set[str]
) -> None:
    result, _ = sizing("dense", engine)
    single = [
        r
        for r in result.rejected
        if r.candidate.gpus_per_replica == 1 and r.candidate.kind == "aggregated"
    ]
    got = {r.candidate.kv_cache_dtype for r in single if r.reason == "engine-unsupported"}
    assert got == refused
    planned = {
        p.candidate.kv_cache_dtype
        for p in result.plans
        if p.candidate.gpus_per_replica == 1 and p.candidate.kind == "aggregated"
    }
    # fp8_ds_mla is MLA-only: refused earlier, by the deployment check.
    assert planned == set(KV_CACHE_DTYPES) - refused - {"fp8_ds_mla"}
    detail = next(r.detail for r in single if r.candidate.kv_cache_dtype == "fp32")
    assert "fp32" in detail


def test_the_vllm_pool_is_pinned_in_bytes_of_whole_blocks() -> None:
    """Llama-3.1-8B, fp8 KV, TP1: 32 layers · 2 · 8 KV heads · 128 · 1 B = 65,536 B per token;
    the pinned bytes are whole 16-token blocks, and the blocks times 16 are the planned
    tokens."""
    result, _ = sizing("dense", "vllm")
    plan = next(
        p
        for p in result.plans
        if p.candidate.kv_cache_dtype == "fp8"
        and p.candidate.gpus_per_replica == 1
        and p.candidate.kind == "aggregated"
    )
    assert plan.launch is not None
    ns = VLLM.parse_args(list(plan.launch.commands[0].argv[2:]))
    assert ns.kv_cache_memory_bytes % (16 * 65_536) == 0
    blocks = ns.kv_cache_memory_bytes // (16 * 65_536)
    assert blocks * 16 == plan.memory.kv_capacity_tokens
    assert ns.gpu_memory_utilization == 0.92  # vLLM 0.21's default, not SGLang's fraction


def test_a_16_gpu_dense_replica_runs_one_server_per_node_on_sglang() -> None:
    """SGLang 0.5.1 refuses dense data parallelism across nodes: TP8 x DP2 on 8-GPU nodes
    becomes two single-node servers behind sglang_router."""
    result, _ = sizing("dense", "sglang")
    plan = next(
        p
        for p in result.plans
        if p.candidate.gpus_per_replica == 16 and p.candidate.kind == "aggregated"
    )
    assert plan.launch is not None
    roles = [c.role for c in plan.launch.commands]
    assert roles == ["node0", "node1", "router"]
    for cmd in plan.launch.commands[:2]:
        ns = SGLANG.parse_args(list(cmd.argv[3:]))
        assert (ns.tensor_parallel_size, ns.data_parallel_size) == (8, 1)
        assert ns.nnodes is None  # one node each (ServerArgs.nnodes defaults to 1)
    assert dict(plan.launch.placeholders)["$NODE1_ADDR"] == "address of node 1"
    assert "$NODE0_ADDR:30000" in shell_command(plan.launch.commands[2].argv)


def test_a_moe_replica_wider_than_a_node_starts_with_mpirun_on_trtllm() -> None:
    """Qwen3-30B-A3B as TP1 x DP16 with EP on 8-GPU nodes: TensorRT-LLM's form is one
    16-rank world (tp_size 16, ep_size 16, attention DP) launched by mpirun over two nodes."""
    arch = _arch(CASES["moe"])
    space = SearchSpace(
        hardware=(H100,),
        engines=("trtllm",),
        tensor_parallel=(1,),
        data_parallel=(16,),
        expert_parallel=(True,),
        max_num_batched_tokens=(BUDGET,),
        kv_cache_dtype=("fp8",),
        max_model_len=(CONTEXT,),
    )
    result = size(
        arch,
        model_name="org/model",
        space=space,
        traffic=TRAFFIC,
        objective=LOOSE,
        prices={},
        verify_top=0,
    )
    (plan,) = result.plans
    _check_trtllm(plan, is_moe=True)
    assert plan.launch is not None
    (cmd,) = plan.launch.commands
    assert cmd.argv[:5] == ("mpirun", "-np", "16", "-H", "$NODE0_ADDR:8,$NODE1_ADDR:8")
    ns = TRTLLM.parse_args(list(cmd.argv[cmd.argv.index("trtllm-serve") + 1 :]))
    assert (ns.tensor_parallel_size, ns.moe_expert_parallel_size, ns.gpus_per_node) == (16, 16, 8)


def test_disaggregated_plans_name_the_connector_and_the_router() -> None:
    for kind, engine in (("dense", "vllm"), ("dense", "sglang"), ("moe", "trtllm")):
        result, _ = sizing(kind, engine)
        pd = [p for p in result.plans if p.candidate.kind == "disaggregated"]
        assert pd, (kind, engine)
        for plan in pd:
            assert plan.launch is not None
            roles = {c.role.split("-")[0] for c in plan.launch.commands}
            assert {"prefill", "decode"} <= roles
            places = dict(plan.launch.placeholders)
            assert "$PREFILL_ADDR" in places
            assert "$DECODE_ADDR" in places
            if engine == "vllm":
                assert any("NixlConnector" in n for n in plan.launch.notes)
            else:
                assert "router" in roles
            if engine == "trtllm":
                (router,) = (c for c in plan.launch.commands if c.role == "router")
                config = yaml.safe_load(dict(router.files)[router.argv[-1]])
                assert config["context_servers"]["urls"] == ["$PREFILL_ADDR:8000"]
                assert config["generation_servers"]["urls"] == ["$DECODE_ADDR:8000"]


def test_abbreviated_and_unknown_flags_are_refused_by_the_snapshot_parsers() -> None:
    """The parsers are strict: the prefix forms the old commands relied on fail."""
    with pytest.raises(_RefusedError):
        SGLANG.parse_args(["--model-path", "m", "--tp", "2"])
    with pytest.raises(_RefusedError):
        SGLANG.parse_args(["--model-path", "m", "--kv-cache-dtype", "nvfp4"])
    with pytest.raises(_RefusedError):
        VLLM.parse_args(["m", "--kv-cache-dtype", "fp32"])
    with pytest.raises(_RefusedError):
        TRTLLM.parse_args(["m", "--tensor-parallel-size", "2"])  # trtllm-serve uses underscores


_WIDE: dict[str, SizingResult] = {}


def _wide(engine: str) -> SizingResult:
    """DeepSeek-V3 over up to 32 H100s: TP 1 or 8, PP 1 or 2, DP 1 or 16, with and without
    expert parallelism."""
    if engine not in _WIDE:
        space = SearchSpace(
            hardware=(H100,),
            engines=(engine,),
            tensor_parallel=(1, 8),
            pipeline_parallel=(1, 2),
            data_parallel=(1, 16),
            expert_parallel=(False, True),
            max_num_batched_tokens=(BUDGET,),
            kv_cache_dtype=("fp8",),
            max_model_len=(CONTEXT,),
        )
        _WIDE[engine] = size(
            _arch(CASES["mla"]),
            model_name="org/model",
            space=space,
            traffic=TRAFFIC,
            objective=LOOSE,
            prices={},
            verify_top=0,
        )
    return _WIDE[engine]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_deepseek_v3_over_two_nodes_has_a_command_per_engine(engine: str) -> None:
    """TP8 x PP2 on 2 x 8 H100 (one TP x PP group over two nodes) and wide EP (DP16 attention
    + EP16) are sized and launched by every engine; every command parses under its table."""
    result = _wide(engine)
    assert len(result.plans) + len(result.rejected) == result.candidates_evaluated
    layouts = {
        (
            p.candidate.tensor_parallel_size,
            p.candidate.pipeline_parallel_size,
            p.candidate.data_parallel_size,
            p.candidate.enable_expert_parallel,
        )
        for p in result.plans
    }
    assert (8, 2, 1, False) in layouts
    assert (1, 1, 16, True) in layouts
    for plan in result.plans:
        if engine == "vllm":
            _check_vllm(plan)
        elif engine == "sglang":
            _check_sglang(plan, is_moe=True)
        else:
            _check_trtllm(plan, is_moe=True)
    tp8_pp2 = next(
        p
        for p in result.plans
        if (p.candidate.tensor_parallel_size, p.candidate.pipeline_parallel_size) == (8, 2)
        and p.candidate.data_parallel_size == 1
    )
    assert tp8_pp2.launch is not None
    servers = list(_servers(tp8_pp2))
    if engine == "trtllm":
        (cmd,) = servers
        assert cmd.argv[:5] == ("mpirun", "-np", "16", "-H", "$NODE0_ADDR:8,$NODE1_ADDR:8")
        return
    assert [c.role for c in servers] == ["node0", "node1"]
    if engine == "sglang":
        for rank, cmd in enumerate(servers):
            ns = _parse(SGLANG, cmd.argv, ["python", "-m", "sglang.launch_server"])
            assert (ns.tensor_parallel_size, ns.pipeline_parallel_size) == (8, 2)
            assert (ns.nnodes, ns.node_rank) == (2, rank)
            assert ns.dist_init_addr == "$MASTER_ADDR:5000"
    # TP x PP groups over nodes with data parallelism have no vLLM / SGLang form
    refused = [
        r
        for r in result.rejected
        if (r.candidate.tensor_parallel_size, r.candidate.pipeline_parallel_size) == (8, 2)
        and r.candidate.data_parallel_size == 16
    ]
    assert refused
    assert all(r.reason == "engine-unsupported" for r in refused)
