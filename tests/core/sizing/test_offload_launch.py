"""Launch commands carry the plan's KV offload, and the flags parse under the engines' own
argument tables (the vLLM 0.21.0 and SGLang 0.5.1 parser snapshots)."""

from __future__ import annotations

import json
from pathlib import Path

import servesize
from servesize.core.architecture import parse_architecture
from servesize.core.memory import Deployment, KVOffload, ResolvedDeployment, resolve_deployment
from servesize.core.sizing import sglang_args, vllm_args
from tests.core.sizing.fixtures import GPUS
from tests.core.sizing.test_engine_commands import SGLANG, VLLM

MODEL = "Qwen--Qwen2.5-7B-Instruct.json"


def _resolved(engine: str, offload: KVOffload | None) -> ResolvedDeployment:
    path = Path(servesize.__file__).parent / "data" / "models" / MODEL
    arch = parse_architecture(json.loads(path.read_text()), name=MODEL)
    dep = Deployment(engine=engine, max_model_len=4096, kv_offload=offload)
    return resolve_deployment(arch, GPUS["h100-sxm"], dep)


def test_vllm_offload_flags_parse() -> None:
    argv = vllm_args("org/model", _resolved("vllm", KVOffload(size_gib=64, backend="lmcache")))
    ns = VLLM.parse_args(argv[2:])
    assert ns.kv_offloading_size == 64.0
    assert ns.kv_offloading_backend == "lmcache"
    plain = VLLM.parse_args(vllm_args("org/model", _resolved("vllm", None))[2:])
    assert plain.kv_offloading_size is None


def test_sglang_hicache_flags_parse() -> None:
    sized = SGLANG.parse_args(
        sglang_args("org/model", _resolved("sglang", KVOffload(hicache_size_gb=100)))[3:]
    )
    assert sized.enable_hierarchical_cache is True
    assert sized.hicache_size == 100
    assert sized.hicache_ratio is None
    ratio = SGLANG.parse_args(sglang_args("org/model", _resolved("sglang", KVOffload()))[3:])
    assert ratio.enable_hierarchical_cache is True
    assert ratio.hicache_ratio == 2.0
    plain = SGLANG.parse_args(sglang_args("org/model", _resolved("sglang", None))[3:])
    assert plain.enable_hierarchical_cache is False
