"""Launch commands carry the plan's prefix caching: each engine's own switch, and nothing
new where the plan keeps the engine's default on (the commands of earlier releases)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import servesize
from servesize.core.architecture import parse_architecture
from servesize.core.memory import Deployment, ResolvedDeployment, resolve_deployment
from servesize.core.sizing import sglang_args, trtllm_options, vllm_args
from tests.core.sizing.fixtures import GPUS

MODEL = "Qwen--Qwen2.5-7B-Instruct.json"


def _resolved(engine: str, caching: bool | None, version: str | None = None) -> ResolvedDeployment:
    path = Path(servesize.__file__).parent / "data" / "models" / MODEL
    arch = parse_architecture(json.loads(path.read_text()), name=MODEL)
    dep = Deployment(
        engine=engine, engine_version=version, max_model_len=4096, enable_prefix_caching=caching
    )
    return resolve_deployment(arch, GPUS["h100-sxm"], dep)


@pytest.mark.parametrize(
    ("caching", "flag"),
    [
        (None, "--enable-prefix-caching"),
        (True, "--enable-prefix-caching"),
        (False, "--no-enable-prefix-caching"),
    ],
)
def test_vllm_switch(caching: bool | None, flag: str) -> None:
    args = vllm_args("m", _resolved("vllm", caching))
    assert flag in args
    other = {"--enable-prefix-caching", "--no-enable-prefix-caching"} - {flag}
    assert not other & set(args)


def test_vllm_v0_keeps_its_default_off_without_a_flag() -> None:
    res = _resolved("vllm", None, "0.7.3")
    assert not res.enable_prefix_caching
    args = vllm_args("m", res)
    assert "--enable-prefix-caching" not in args
    assert "--no-enable-prefix-caching" not in args


def test_sglang_and_trtllm_switches() -> None:
    assert "--disable-radix-cache" not in sglang_args("m", _resolved("sglang", None))
    assert "--disable-radix-cache" in sglang_args("m", _resolved("sglang", False))
    on = trtllm_options(_resolved("trtllm", None), is_moe=False, max_tokens=None)
    off = trtllm_options(_resolved("trtllm", False), is_moe=False, max_tokens=None)
    assert on["kv_cache_config"]["enable_block_reuse"] is True  # type: ignore[index]
    assert off["kv_cache_config"]["enable_block_reuse"] is False  # type: ignore[index]
