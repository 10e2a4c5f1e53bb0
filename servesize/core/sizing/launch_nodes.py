"""Launch forms of a model-parallel group wider than one node (TP × PP over several nodes).

- **vLLM 0.21.0** (multiprocessing executor across nodes, ``ParallelConfig.nnodes``,
  ``node_rank``, ``master_addr``; ``vllm/engine/arg_utils.py``): the same ``vllm serve`` on
  every node with ``--distributed-executor-backend mp --nnodes N --node-rank k --master-addr
  $MASTER_ADDR``; nodes ``k > 0`` add ``--headless`` (workers only, the API server runs on node
  0). A data-parallel rank must fit on one node (``--data-parallel-size-local`` counts whole
  ranks), so DP with such a group has no form.
- **SGLang 0.5.1**: every node runs ``sglang.launch_server`` with ``--nnodes N --node-rank k
  --dist-init-addr $MASTER_ADDR:5000`` (``ServerArgs.nnodes``, ``node_rank``,
  ``dist_init_addr``); dense data parallelism across nodes is refused by 0.5.1 (not under DP
  attention), and PP with DP attention over nodes is not modelled.
- **TensorRT-LLM 1.0**: one ``mpirun -np TP·PP … trtllm-llmapi-launch trtllm-serve`` with
  ``--gpus_per_node`` (``launch.py``); a dense model's data-parallel copies are separate
  servers on disjoint GPUs, which a copy wider than a node cannot be.
"""

from __future__ import annotations

import math

from servesize.core.memory import ResolvedDeployment

__all__ = [
    "VLLM_EXECUTOR",
    "group_nodes",
    "unsupported_multi_node",
    "vllm_node_flags",
]

VLLM_EXECUTOR = "mp"
"""vLLM's multiprocessing executor, which spans nodes with ``--nnodes``."""


def group_nodes(res: ResolvedDeployment, gpus_per_node: int) -> int:
    """Nodes one TP × PP group fills (1 when it fits in a node)."""
    group = res.tensor_parallel_size * res.pipeline_parallel_size
    return max(math.ceil(group / max(gpus_per_node, 1)), 1)


def vllm_node_flags(rank: int, nodes: int, master: str) -> list[str]:
    """The flags that place node ``rank`` of a vLLM TP × PP group over ``nodes`` nodes."""
    flags = ["--distributed-executor-backend", VLLM_EXECUTOR]
    flags += ["--nnodes", str(nodes), "--node-rank", str(rank), "--master-addr", master]
    if rank > 0:
        flags.append("--headless")
    return flags


def unsupported_multi_node(
    res: ResolvedDeployment, *, is_moe: bool, gpus_per_node: int | None
) -> str | None:
    """Why the engine has no form for a TP × PP group wider than a node with this layout, or
    None (module docstring)."""
    if gpus_per_node is None or group_nodes(res, gpus_per_node) == 1:
        return None
    group = res.tensor_parallel_size * res.pipeline_parallel_size
    dp = res.data_parallel_size
    where = f"TP·PP = {group} GPUs over {gpus_per_node}-GPU nodes"
    if dp == 1:
        return None
    if res.engine == "vllm":
        return f"vLLM 0.21 places each data-parallel rank on one node: {where} with DP{dp}"
    if res.engine == "sglang" and (not is_moe or res.pipeline_parallel_size > 1):
        return f"SGLang 0.5.1 has no multi-node form for {where} with DP{dp}"
    if res.engine == "trtllm" and not is_moe:
        return f"TensorRT-LLM data-parallel copies of {where} cannot share nodes"
    return None
