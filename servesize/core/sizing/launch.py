"""A plan's launch commands per engine: one command per node of a multi-node replica, the
router and KV connector of a disaggregated plan, with the placeholders they use and notes on
what each pins (the flags themselves: :mod:`.engine_args`, whose docstring names the engine
releases and sources).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from servesize.core.memory import MemoryPlan, ResolvedDeployment
from servesize.core.sizing.engine_args import (
    COMMAND_VERSIONS,
    ROUTER_BIND,
    SGLANG_BOOTSTRAP_PORT,
    SGLANG_DIST_PORT,
    SGLANG_PORT,
    TRTLLM_EXTRA_OPTIONS,
    TRTLLM_PORT,
    Role,
    master_placeholder,
    sglang_args,
    sglang_parallel,
    trtllm_args,
    trtllm_options,
    vllm_args,
    yaml_lines,
)
from servesize.core.sizing.launch_nodes import group_nodes, vllm_node_flags
from servesize.core.speculative import DRAFT_PLACEHOLDER, SpeculativeDecoding

__all__ = ["TRTLLM_DISAGG_CONFIG", "LaunchCommand", "LaunchPlan", "launch_plan"]

TRTLLM_DISAGG_CONFIG = "disagg_config.yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchCommand:
    """One process to start: where, its argument list and the files it reads."""

    role: str
    """``server``, ``node<k>``, ``prefill``, ``decode``, ``router``."""
    argv: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()
    """``(path, content)`` the command reads (TensorRT-LLM's YAML)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchPlan:
    """The commands of one plan for its engine and the release they are written for."""

    engine: str
    engine_version: str
    commands: tuple[LaunchCommand, ...]
    placeholders: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()


def _nodes(res: ResolvedDeployment, gpus_per_node: int) -> tuple[int, int]:
    """``(nodes, data-parallel ranks per node)`` of one replica."""
    per_rank = res.tensor_parallel_size * res.pipeline_parallel_size
    gpus = per_rank * res.data_parallel_size
    if gpus <= gpus_per_node:
        return 1, res.data_parallel_size
    local = max(gpus_per_node // per_rank, 1)
    return math.ceil(res.data_parallel_size / local), local


def _knob_notes(res: ResolvedDeployment, spec: SpeculativeDecoding | None) -> list[str]:
    """What the commands carry for speculation and the host KV tier."""
    notes: list[str] = []
    if spec is not None:
        draft = f" with draft {spec.draft_model}" if spec.draft_model else ""
        notes.append(
            f"speculative decoding: {spec.method}{draft}, {spec.k} tokens proposed per step "
            f"(the plan assumed {spec.expected_tokens:.2f} tokens per verification step)"
        )
        if spec.method == "eagle3" and not spec.draft_model:
            notes.append(f"substitute the EAGLE-3 head's checkpoint for {DRAFT_PLACEHOLDER}")
    offload = res.kv_offload
    if offload is not None and offload.host_cache_size_bytes is not None:
        notes.append(
            f"kv_cache_config.host_cache_size {offload.host_cache_size_bytes} B of host memory "
            "per rank: the secondary pool that evicted reusable blocks move to"
        )
    return notes


def _node0(role: Role) -> str:
    return "address of node 0" + ("" if role == "both" else f" of a {role} replica")


def _vllm_plan(
    model: str,
    memory: MemoryPlan,
    gpus_per_node: int,
    disaggregated: bool,
    spec: SpeculativeDecoding | None,
) -> tuple[list[LaunchCommand], list[str], list[tuple[str, str]]]:
    res = memory.deployment
    pinned = memory.kv_cache_bytes_per_gpu
    nodes, local = _nodes(res, gpus_per_node)
    notes = [
        f"--kv-cache-memory-bytes {pinned} pins the planned pool ({memory.kv_blocks} blocks of "
        f"{memory.kv_block_size} tokens per GPU, {memory.kv_capacity_tokens} tokens per "
        "replica); vLLM then ignores --gpu-memory-utilization for the KV budget",
        "--enable-prefix-caching is vLLM's default; the plan credits no prefix hits",
    ]
    places: list[tuple[str, str]] = []
    roles: list[Role] = ["prefill", "decode"] if disaggregated else ["both"]
    commands: list[LaunchCommand] = []
    spread = group_nodes(res, gpus_per_node)
    for role in roles:
        name = "server" if role == "both" else role
        if nodes == 1 and spread == 1:
            argv = vllm_args(model, res, role=role, kv_cache_bytes=pinned, speculative=spec)
            commands.append(LaunchCommand(role=name, argv=tuple(argv)))
            continue
        for rank in range(max(nodes, spread)):
            if spread > 1:  # one TP x PP group over several nodes
                argv = vllm_args(model, res, role=role, kv_cache_bytes=pinned, speculative=spec)
                argv += vllm_node_flags(rank, spread, master_placeholder(role))
            else:
                argv = vllm_args(
                    model,
                    res,
                    role=role,
                    kv_cache_bytes=pinned,
                    node=(rank, nodes, local),
                    speculative=spec,
                )
            label = f"node{rank}" if role == "both" else f"{role}-node{rank}"
            commands.append(LaunchCommand(role=label, argv=tuple(argv)))
    if spread > 1:
        places += [
            (master_placeholder(r), f"{_node0(r)} (runs the API server; torch.distributed)")
            for r in roles
        ]
        notes.append(
            f"one TP{res.tensor_parallel_size} x PP{res.pipeline_parallel_size} group spans "
            f"{spread} nodes (multiprocessing executor); nodes 1.. run headless workers"
        )
    elif nodes > 1:
        places += [
            (master_placeholder(r), f"{_node0(r)} (runs the API server and DP coordinator)")
            for r in roles
        ]
        notes.append(
            f"one replica spans {nodes} nodes ({local} data-parallel ranks of "
            f"{res.tensor_parallel_size * res.pipeline_parallel_size} GPUs per node); secondary "
            "nodes run headless"
        )
    if disaggregated:
        places += [
            ("$PREFILL_ADDR", "a prefill server, port 8000"),
            ("$DECODE_ADDR", "a decode server, port 8000"),
        ]
        notes.append(
            "P/D: both pools load the NixlConnector (kv_role kv_both; set "
            "VLLM_NIXL_SIDE_CHANNEL_HOST to each host's address); put a prefill/decode-aware "
            "proxy in front (vLLM's "
            "disaggregated-serving proxy example or llm-d's router) sending each request to "
            "$PREFILL_ADDR with max_tokens 1, then to $DECODE_ADDR with the returned KV "
            "transfer parameters"
        )
    return commands, notes, places


def _sglang_plan(
    model: str,
    memory: MemoryPlan,
    gpus_per_node: int,
    disaggregated: bool,
    is_moe: bool,
    spec: SpeculativeDecoding | None,
) -> tuple[list[LaunchCommand], list[str], list[tuple[str, str]]]:
    res = memory.deployment
    pool = memory.kv_capacity_tokens
    nodes, local = _nodes(res, gpus_per_node)
    notes = [
        f"--max-total-tokens {pool} pins the planned pool per scheduler; --mem-fraction-static "
        f"{res.memory_fraction:g} is SGLang's share of the memory free before loading for "
        "weights + KV",
        "radix (prefix) cache is SGLang's default; the plan credits no prefix hits",
    ]
    _, _, _, dp_attention = sglang_parallel(res, is_moe=is_moe)
    if dp_attention:
        notes.append(
            "--chunked-prefill-size is the per-rank budget times dp_size: SGLang divides it by "
            "dp_size under DP attention"
        )
    places: list[tuple[str, str]] = []
    commands: list[LaunchCommand] = []
    roles: list[Role] = ["prefill", "decode"] if disaggregated else ["both"]
    spread = group_nodes(res, gpus_per_node)
    nodes = max(nodes, spread)
    for role in roles:
        name = "server" if role == "both" else role
        if nodes == 1:
            argv = sglang_args(
                model, res, role=role, is_moe=is_moe, max_total_tokens=pool, speculative=spec
            )
            commands.append(LaunchCommand(role=name, argv=tuple(argv)))
            continue
        for rank in range(nodes):
            label = f"node{rank}" if role == "both" else f"{role}-node{rank}"
            if dp_attention or spread > 1:
                argv = sglang_args(
                    model,
                    res,
                    role=role,
                    is_moe=is_moe,
                    max_total_tokens=pool,
                    node=(rank, nodes),
                    speculative=spec,
                )
            else:
                argv = sglang_args(
                    model,
                    res,
                    role=role,
                    is_moe=is_moe,
                    max_total_tokens=pool,
                    data_parallel_size=local,
                    speculative=spec,
                )
            commands.append(LaunchCommand(role=label, argv=tuple(argv)))
    if nodes > 1 and (dp_attention or spread > 1):
        places += [
            (
                master_placeholder(r),
                f"{_node0(r)} (torch.distributed, port {SGLANG_DIST_PORT})",
            )
            for r in roles
        ]
    elif nodes > 1 and not disaggregated:
        urls = [f"http://$NODE{k}_ADDR:{SGLANG_PORT}" for k in range(nodes)]
        router = ["python", "-m", "sglang_router.launch_router", *ROUTER_BIND]
        router += ["--worker-urls", *urls]
        commands.append(LaunchCommand(role="router", argv=tuple(router)))
        places += [(f"$NODE{k}_ADDR", f"address of node {k}") for k in range(nodes)]
        notes.append(
            "SGLang 0.5.1 refuses dense data parallelism across nodes, so each node runs its "
            f"own server ({local} data-parallel ranks) behind sglang_router"
        )
    if disaggregated:
        router = ["python", "-m", "sglang_router.launch_router", *ROUTER_BIND]
        router += ["--pd-disaggregation", "--prefill", f"http://$PREFILL_ADDR:{SGLANG_PORT}"]
        router += [str(SGLANG_BOOTSTRAP_PORT), "--decode", f"http://$DECODE_ADDR:{SGLANG_PORT}"]
        commands.append(LaunchCommand(role="router", argv=tuple(router)))
        places += [
            ("$PREFILL_ADDR", "a prefill server"),
            ("$DECODE_ADDR", "a decode server"),
        ]
        notes.append(
            "P/D: KV moves over NIXL (--disaggregation-transfer-backend nixl); add every "
            "prefill and decode server to the router"
        )
    return commands, notes, places


def _trtllm_plan(
    model: str,
    memory: MemoryPlan,
    gpus_per_node: int,
    disaggregated: bool,
    is_moe: bool,
    spec: SpeculativeDecoding | None,
) -> tuple[list[LaunchCommand], list[str], list[tuple[str, str]]]:
    res = memory.deployment
    pool = memory.kv_capacity_tokens
    notes = [
        f"kv_cache_config.max_tokens {pool} pins the planned pool (TensorRT-LLM takes the "
        "smaller of max_tokens and free_gpu_memory_fraction)",
        f"chunked prefill off and capacity_scheduler_policy "
        f"{(res.capacity_scheduler_policy or 'guaranteed_no_evict').upper()}, as planned",
    ]
    places: list[tuple[str, str]] = []
    world = res.tensor_parallel_size * res.pipeline_parallel_size
    world *= res.data_parallel_size if is_moe else 1
    roles: list[Role] = ["prefill", "decode"] if disaggregated else ["both"]
    commands: list[LaunchCommand] = []
    copies = 1 if is_moe else res.data_parallel_size
    for role in roles:
        yaml_text = (
            "\n".join(
                yaml_lines(
                    trtllm_options(res, is_moe=is_moe, max_tokens=pool, role=role, speculative=spec)
                )
            )
            + "\n"
        )
        files = ((TRTLLM_EXTRA_OPTIONS, yaml_text),)
        multi = world > gpus_per_node
        argv = trtllm_args(
            model, res, is_moe=is_moe, gpus_per_node=gpus_per_node if multi else None
        )
        if multi:
            nodes = math.ceil(world / gpus_per_node)
            hosts = ",".join(f"$NODE{k}_ADDR:{gpus_per_node}" for k in range(nodes))
            argv = ["mpirun", "-np", str(world), "-H", hosts, "trtllm-llmapi-launch", *argv]
            places += [(f"$NODE{k}_ADDR", f"address of node {k}") for k in range(nodes)]
            notes.append(
                "one replica spans several nodes: start it once with mpirun (or "
                "srun --mpi=pmix) from node 0"
            )
        name = "server" if role == "both" else role
        if copies == 1:
            commands.append(LaunchCommand(role=name, argv=tuple(argv), files=files))
            continue
        per_node = max(gpus_per_node // world, 1)
        for k in range(copies):
            slot = k % per_node
            devices = ",".join(str(slot * world + g) for g in range(world))
            port = ["--port", str(TRTLLM_PORT + slot)]
            at = argv.index("--port")
            copy = ["env", f"CUDA_VISIBLE_DEVICES={devices}", *argv[:at], *port, *argv[at + 2 :]]
            label = f"{name}{k}" if copies <= per_node else f"{name}{k}-node{k // per_node}"
            commands.append(LaunchCommand(role=label, argv=tuple(copy), files=files))
    if copies > 1:
        notes.append(
            f"TensorRT-LLM has no data parallelism for a dense model: {copies} servers on "
            f"disjoint sets of {world} GPUs (CUDA_VISIBLE_DEVICES, one port each) behind a "
            "load balancer"
        )
    if disaggregated:
        config = {
            "hostname": "0.0.0.0",
            "port": TRTLLM_PORT,
            "backend": "pytorch",
            "context_servers": {"num_instances": 1, "urls": [f"$PREFILL_ADDR:{TRTLLM_PORT}"]},
            "generation_servers": {"num_instances": 1, "urls": [f"$DECODE_ADDR:{TRTLLM_PORT}"]},
        }
        text = "\n".join(yaml_lines(config)) + "\n"
        commands.append(
            LaunchCommand(
                role="router",
                argv=("trtllm-serve", "disaggregated", "-c", TRTLLM_DISAGG_CONFIG),
                files=((TRTLLM_DISAGG_CONFIG, text),),
            )
        )
        places += [("$PREFILL_ADDR", "a prefill server"), ("$DECODE_ADDR", "a decode server")]
        notes.append(
            "P/D: both pools send KV through cache_transceiver_config (backend nixl); the "
            f"router reads {TRTLLM_DISAGG_CONFIG}: substitute the addresses there and list "
            "every server of each pool"
        )
    return commands, notes, places


def launch_plan(
    model: str,
    memory: MemoryPlan,
    *,
    is_moe: bool,
    gpus_per_node: int | None,
    disaggregated: bool = False,
    speculative: SpeculativeDecoding | None = None,
    credits_prefix: bool = False,
) -> LaunchPlan:
    """The commands of the plan's engine for one replica (each pool's replica for P/D), with
    the plan's speculation when it has one (:func:`~.engine_args.unsupported_speculative`
    says which engine cannot run it; here that is a ``ValueError``). ``credits_prefix``: the
    plan was sized on the traffic's prefix hits, and its notes say so."""
    res = memory.deployment
    node = gpus_per_node or (
        res.tensor_parallel_size * res.pipeline_parallel_size * res.data_parallel_size
    )
    if res.engine == "sglang":
        commands, notes, places = _sglang_plan(
            model, memory, node, disaggregated, is_moe, speculative
        )
    elif res.engine == "trtllm":
        commands, notes, places = _trtllm_plan(
            model, memory, node, disaggregated, is_moe, speculative
        )
    else:
        commands, notes, places = _vllm_plan(model, memory, node, disaggregated, speculative)
    notes += _knob_notes(res, speculative)
    if credits_prefix:
        notes = [
            n.replace(
                "the plan credits no prefix hits", "the plan credits the traffic's prefix hits"
            )
            for n in notes
        ]
    flag = {"sglang": "--context-length", "trtllm": "max_seq_len"}.get(
        res.engine, "--max-model-len"
    )
    notes.append(
        f"{flag} {res.max_model_len}: the context length the plan was sized for (by default "
        "the smallest power of two >= 2048 that holds the longest request), set explicitly; "
        "longer requests need a new sizing"
    )
    return LaunchPlan(
        engine=res.engine,
        engine_version=COMMAND_VERSIONS.get(res.engine, res.engine_version),
        commands=tuple(commands),
        placeholders=tuple(dict(places).items()),
        notes=tuple(notes),
    )
