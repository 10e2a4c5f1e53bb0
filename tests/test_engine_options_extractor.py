"""``bench/engine_options.py`` reads option tables the way each engine builds its parser: from
small source trees written in the engines' idioms (vLLM's ``get_kwargs(Config)`` spreads, SGLang's
``parser.add_argument``, sglang_router's f-string flags, TensorRT-LLM's ``click.option``)."""

from __future__ import annotations

from pathlib import Path

from bench.engine_options import Sources, extract_sglang, extract_trtllm, extract_vllm

VLLM_CONFIG = """
from typing import Literal
CacheDType = Literal["auto", "fp8", "nvfp4"]

@config
class CacheConfig:
    block_size: int = None
    cache_dtype: CacheDType = "auto"
    enable_prefix_caching: bool = True
    kv_cache_memory_bytes: int | None = None
    cudagraph_capture_sizes: list[int] | None = None
"""
VLLM_ARGS = """
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        cache_kwargs = get_kwargs(CacheConfig)
        group = parser.add_argument_group()
        group.add_argument("--block-size", **cache_kwargs["block_size"])
        group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
        group.add_argument(
            "--enable-prefix-caching",
            **{**cache_kwargs["enable_prefix_caching"], "default": None},
        )
        group.add_argument("--kv-cache-memory-bytes", **cache_kwargs["kv_cache_memory_bytes"])
        group.add_argument("--sizes", **cache_kwargs["cudagraph_capture_sizes"])
        group.add_argument("--data-parallel-size-local", "-dpl", type=int)
        group.add_argument("--headless", action="store_true")
"""
SGLANG_ARGS = """
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=1)
        parser.add_argument("--kv-cache-dtype", type=str, choices=["auto", "fp8_e4m3"])
        parser.add_argument("--enable-dp-attention", action="store_true")
"""
ROUTER_ARGS = """
class RouterArgs:
    @staticmethod
    def add_cli_args(parser, use_router_prefix=False):
        prefix = "router-" if use_router_prefix else ""
        parser.add_argument(f"--{prefix}prefill", nargs="+", action="append")
"""
TRT_SERVE = """
@click.command("serve")
@click.argument("model", type=str)
@click.option("--tensor_parallel_size", "--tp_size", type=int, default=1)
@click.option("--config", "--extra_llm_api_options", "extra_llm_api_options", type=str)
@click.option("--trust_remote_code", is_flag=True, default=False)
@click.option("--backend", type=ChoiceWithAlias(["pytorch", "tensorrt"], {"trt": "tensorrt"}))
def serve(model, tensor_parallel_size, extra_llm_api_options, trust_remote_code, backend):
    pass
"""
TRT_ARGS = """
class KvCacheConfig(StrictBaseModel, PybindMirror):
    max_tokens: Optional[int] = Field(default=None)
    dtype: str = Field(default="auto")

class BaseLlmArgs(StrictBaseModel):
    kv_cache_config: KvCacheConfig = Field(default_factory=KvCacheConfig)

class TorchLlmArgs(BaseLlmArgs):
    enable_attention_dp: bool = False
"""


def _tree(root: Path, files: dict[str, str]) -> Sources:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Sources(root)


def test_vllm_kinds_follow_the_config_annotations(tmp_path: Path) -> None:
    sources = _tree(
        tmp_path,
        {"vllm/config/cache.py": VLLM_CONFIG, "vllm/engine/arg_utils.py": VLLM_ARGS},
    )
    options = extract_vllm(sources)
    assert options["--block-size"]["kind"] == "int"
    assert options["--kv-cache-dtype"]["choices"] == ["auto", "fp8", "nvfp4"]
    assert options["--enable-prefix-caching"]["kind"] == "bool_optional"
    assert options["--kv-cache-memory-bytes"]["kind"] == "int"
    assert options["--sizes"] | {"kind": "int", "nargs": "+"} == options["--sizes"]
    assert options["--data-parallel-size-local"]["flags"] == ["--data-parallel-size-local", "-dpl"]
    assert options["--headless"]["kind"] == "store_true"


def test_sglang_and_router_tables(tmp_path: Path) -> None:
    sources = _tree(
        tmp_path,
        {
            "sglang/srt/server_args.py": SGLANG_ARGS,
            "sglang_router/launch_router.py": ROUTER_ARGS,
        },
    )
    options = extract_sglang(sources)
    assert options["--tensor-parallel-size"]["flags"] == ["--tensor-parallel-size", "--tp-size"]
    assert options["--kv-cache-dtype"]["choices"] == ["auto", "fp8_e4m3"]
    assert options["--enable-dp-attention"]["kind"] == "store_true"
    router = extract_sglang(sources, "sglang_router/launch_router.py")
    assert router["--prefill"] == {
        "nargs": "+",
        "append": True,
        "kind": "str",
        "flags": ["--prefill"],
    }


def test_trtllm_click_options_and_llm_args(tmp_path: Path) -> None:
    sources = _tree(
        tmp_path,
        {
            "tensorrt_llm/commands/serve.py": TRT_SERVE,
            "tensorrt_llm/llmapi/llm_args.py": TRT_ARGS,
        },
    )
    options, classes = extract_trtllm(sources)
    assert options["<model>"]["positional"] == "model"
    assert options["--tensor_parallel_size"]["flags"] == ["--tensor_parallel_size", "--tp_size"]
    assert options["--config"]["dest"] == "extra_llm_api_options"
    assert options["--trust_remote_code"]["kind"] == "store_true"
    assert options["--backend"]["choices"] == ["pytorch", "tensorrt"]
    assert set(classes["TorchLlmArgs"]["fields"]) == {"enable_attention_dp", "kv_cache_config"}
    assert set(classes["KvCacheConfig"]["fields"]) == {"max_tokens", "dtype"}
