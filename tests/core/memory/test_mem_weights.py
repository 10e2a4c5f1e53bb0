"""Weight ledgers worked out by hand, one per format and parallelism case.

Element counts follow the HF checkpoint shapes; bytes per format are those vLLM allocates
(weights, scales, zero points, g_idx). Every expected number below is derived in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.hardware import HardwareSpec, Interconnect
from servesize.core.memory import (
    DEFAULT_CONSTANTS,
    GIB,
    Deployment,
    MemoryConstants,
    resolve_deployment,
    weight_ledger,
)
from servesize.core.memory.formats import FormatKind, WeightFormat
from servesize.core.memory.inventory import stage_tensors
from servesize.core.memory.scheme import is_unquantized_module
from servesize.core.memory.sharding import pp_layer_ranges

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
NO_ROPE = MemoryConstants(include_rope_cache=False)
H200 = HardwareSpec(
    id="h200",
    vendor="NVIDIA",
    name="H200 SXM",
    memory_bytes=141 * GIB,
    memory_bandwidth_bytes_per_s=4_800_000_000_000,
    interconnect=Interconnect(kind="nvlink", bandwidth_bytes_per_s=450_000_000_000),
)


def _config(filename: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return config


def _arch(filename: str, **extra: Any) -> Architecture:
    return parse_architecture({**_config(filename), **extra}, name=filename)


def _ledger(
    arch: Architecture,
    constants: MemoryConstants = NO_ROPE,
    stage: int = 0,
    **deployment: Any,
) -> dict[str, int]:
    res = resolve_deployment(arch, H200, Deployment(max_model_len=4096, **deployment))
    ranges = pp_layer_ranges(len(arch.layers), res.pipeline_parallel_size)
    ledger = weight_ledger(
        arch,
        res,
        constants,
        ranges[stage],
        first=stage == 0,
        last=stage == len(ranges) - 1,
    )
    out = dict(ledger.by_component)
    out["total"] = ledger.total_bytes
    for item in ledger.items:
        out[item.name] = item.bytes_per_gpu
    return out


def test_llama_3_1_8b_bf16_tp1() -> None:
    # embedding = lm_head = 128256 · 4096 · 2 B = 1,050,673,152 B (128256 is a multiple of 64)
    # attention/layer: (4096·4096 + 1024·4096 + 1024·4096 + 4096·4096) · 2 B = 83,886,080
    #   · 32 layers = 2,684,354,560 B
    # MLP/layer: 3 · 14336 · 4096 · 2 B = 352,321,536 · 32 = 11,274,289,152 B
    # norms: (2 · 32 + 1) · 4096 · 2 B = 532,480 B
    # RoPE cache: 131072 positions · 128 · 2 B = 33,554,432 B
    ledger = _ledger(_arch("meta-llama--Llama-3.1-8B.json"), constants=DEFAULT_CONSTANTS)
    assert ledger["embedding"] == ledger["lm_head"] == 1_050_673_152
    assert ledger["attention"] == 2_684_354_560
    assert ledger["mlp_dense"] == 11_274_289_152
    assert ledger["norms"] == 532_480
    assert ledger["weights: RoPE cos/sin cache"] == 33_554_432
    # 8,030,261,248 parameters · 2 B + RoPE cache
    assert ledger["total"] == 8_030_261_248 * 2 + 33_554_432


def test_tp_with_kv_head_replication_qwen2_5_3b() -> None:
    # Qwen2.5-3B: 16 heads, 2 KV heads, head_dim 2048/16 = 128, 36 layers, QKV biases, tied.
    # TP 4: q 16/4 · 128 = 512 rows; K and V keep max(1, 2 // 4) = 1 head = 128 rows each
    # (replicated twice), not 2 · 128 / 4 = 64. Per layer and GPU:
    # (512·2048 + 128·2048 + 128·2048 + 2048·512) · 2 B = 5,242,880 B
    # + QKV bias (512 + 128 + 128) · 2 B = 1,536 B  -> 5,244,416 · 36 = 188,798,976 B
    arch = _arch("Qwen--Qwen2.5-3B-Instruct.json")
    ledger = _ledger(arch, tensor_parallel_size=4)
    assert ledger["attention"] == 188_798_976
    # vocab-parallel embedding: pad64(151936) = 151936; / 4 = 37984 rows · 2048 · 2 B;
    # tied head at PP 1: no separate lm_head
    assert ledger["embedding"] == 37_984 * 2048 * 2
    assert "lm_head" not in ledger
    # norms are replicated: (2 · 36 + 1) · 2048 · 2 B on every GPU
    assert ledger["norms"] == 73 * 2048 * 2
    # MLP: 3 · (11008 / 4) · 2048 · 2 B · 36 layers
    assert ledger["mlp_dense"] == 3 * 2752 * 2048 * 2 * 36


def test_mla_deepseek_v3_tp8_fp8_block() -> None:
    # fp8 block 128x128: N·K bytes + 4 B per ⌈N/128⌉·⌈K/128⌉ block. Per layer on one of 8 GPUs:
    #   q_a_proj (replicated) 1536·7168 + 4·12·56      = 11,010,048 + 2,688 = 11,012,736
    #   q_a_layernorm 1536 · 2 B                        = 3,072
    #   q_b_proj (128/8 · 192 = 3072 rows) 3072·1536 + 4·24·12 = 4,718,592 + 1,152 = 4,719,744
    #   kv_a_proj_with_mqa (replicated) 576·7168 + 4·5·56 = 4,128,768 + 1,120 = 4,129,888
    #   kv_a_layernorm 512 · 2 B                        = 1,024
    #   kv_b_proj (16 · (128+128) = 4096 rows) 4096·512 + 4·32·4 = 2,097,152 + 512 = 2,097,664
    #   o_proj 7168 · (16·128 = 2048) + 4·56·16         = 14,680,064 + 3,584 = 14,683,648
    #   sum = 36,647,776 B · 61 layers = 2,235,514,336 B
    arch = _arch("deepseek-ai--DeepSeek-V3.json")
    ledger = _ledger(arch, tensor_parallel_size=8)
    assert ledger["attention"] == 2_235_514_336
    # the dequantized kv_b_proj copy vLLM keeps as W_UK/W_UV: 4096 · 512 · 2 B · 61 layers
    assert ledger["weights: MLA W_UK/W_UV (dequantized kv_b_proj)"] == 4096 * 512 * 2 * 61
    # router gates stay bf16 and replicated: 58 MoE layers · (256 · 7168 · 2 B + 256 · 4 B fp32
    # score-correction bias) = 58 · 3,671,040 = 212,920,320 B
    assert ledger["router"] == 212_920_320
    # routed experts TP-sharded (2048 / 8 = 256 wide), all 256 on each GPU, fp8 block:
    #   w1 = w3: 256·7168 + 4·2·56 = 1,835,008 + 448 = 1,835,456; w2: 7168·256 + 4·56·2 = same
    #   per layer 256 experts · 3 · 1,835,456 = 1,409,630,208 · 58 layers = 81,758,552,064
    assert ledger["experts_routed"] == 81_758_552_064


def test_expert_parallel_most_loaded_rank_qwen3_30b() -> None:
    # Qwen3-30B-A3B: 128 experts of width 768, 48 MoE layers. TP 2 · DP 3 with expert
    # parallelism: EP = 6 ranks, the most loaded holds ceil(128 / 6) = 22 whole experts:
    # 22 · 3 · 768 · 2048 · 2 B = 207,618,048 B per layer · 48 = 9,965,666,304 B
    arch = _arch("Qwen--Qwen3-30B-A3B.json")
    ep = _ledger(arch, tensor_parallel_size=2, data_parallel_size=3, enable_expert_parallel=True)
    assert ep["experts_routed"] == 9_965_666_304
    # without EP the experts are sharded over TP·DP = 6: 128 · 3 · (768/6 = 128) · 2048 · 2 B
    # = 201,326,592 B per layer · 48 = 9,663,676,416 B
    tp = _ledger(arch, tensor_parallel_size=2, data_parallel_size=3)
    assert tp["experts_routed"] == 9_663_676_416
    # attention is TP-sharded over TP = 2 only, in both cases
    assert ep["attention"] == tp["attention"]


def test_pipeline_parallel_stages_llama_3_1_70b() -> None:
    # 80 layers over 3 stages as get_pp_indices splits them: 26 each, the 2 spare layers to the
    # two stages before the last: [27, 27, 26].
    assert [len(r) for r in pp_layer_ranges(80, 3)] == [27, 27, 26]
    arch = _arch("meta-llama--Llama-3.1-70B.json")
    # one layer: (8192² + 2·1024·8192 + 8192² + 3·28672·8192) · 2 B + 2·8192·2 B norms
    # = 855,638,016 · 2 + 32,768 = 1,711,308,800 B
    layer = 1_711_308_800
    embedding = 128_256 * 8192 * 2  # 2,101,346,304 B, first stage; lm_head on the last
    first = _ledger(arch, pipeline_parallel_size=3, stage=0)
    middle = _ledger(arch, pipeline_parallel_size=3, stage=1)
    last = _ledger(arch, pipeline_parallel_size=3, stage=2)
    assert first["total"] == embedding + 27 * layer
    assert middle["total"] == 27 * layer
    assert last["total"] == embedding + 26 * layer + 8192 * 2  # + final norm


def test_awq_int4_llama_3_1_8b() -> None:
    # AWQ int4, group 128, zero points: qweight N·K/2 + scales 2·(K/128)·N + qzeros
    # 4·(K/128)·(N/8) = N·K · (1/2 + 2/128 + 1/256) = N·K · 133/256 B.
    # Linear elements per layer: 41,943,040 (attention) + 176,160,768 (MLP) = 218,103,808
    # -> 113,311,744 B · 32 layers = 3,625,975,808 B. Embedding, lm_head, norms stay bf16.
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    arch = _arch("meta-llama--Llama-3.1-8B.json", quantization_config=awq)
    ledger = _ledger(arch)
    assert ledger["attention"] + ledger["mlp_dense"] == 3_625_975_808
    assert ledger["embedding"] == ledger["lm_head"] == 1_050_673_152
    # one q_proj (4096 x 4096): 8,388,608 + 262,144 + 65,536 = 8,716,288 B
    fmt = WeightFormat(
        kind=FormatKind.INT_GROUP, label="awq", bits=4, group_size=128, zero_points=True
    )
    assert fmt.tensor_bytes(4096, 4096) == 8_716_288


def test_gptq_int4_adds_g_idx() -> None:
    # GPTQ adds g_idx, 4 B per input feature: per layer K = 4·4096 (q, k, v, o) + 2·4096
    # (gate, up) + 14336 (down) = 38,912 -> 155,648 B; · 32 = 4,980,736 B over AWQ's bytes
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}
    arch = _arch("meta-llama--Llama-3.1-8B.json", quantization_config=gptq)
    ledger = _ledger(arch)
    assert ledger["attention"] + ledger["mlp_dense"] == 3_625_975_808 + 4_980_736


def test_mxfp4_gpt_oss_20b_experts() -> None:
    # MXFP4 experts: per expert and layer, w1 = w3 = w2 = 2880 x 2880 values at 1/2 B plus one
    # uint8 scale per 32: 4,147,200 + 2880 · 90 = 4,406,400 B each -> 13,219,200 B; biases
    # (2 · 2880 + 2880) · 2 B = 17,280 B -> 13,236,480 B · 32 experts · 24 layers
    # = 10,165,616,640 B. Attention, router, embeddings stay bf16 (modules_to_not_convert).
    arch = _arch("openai--gpt-oss-20b.json")
    ledger = _ledger(arch)
    assert ledger["experts_routed"] == 10_165_616_640
    # attention/layer: (4096·2880 + 2·512·2880 + 2880·4096) · 2 B + biases (4096 + 2·512 +
    # 2880) · 2 B + 64 sinks · 2 B = 53,084,160 + 16,000 + 128 = 53,100,288 · 24 layers
    assert ledger["attention"] == 1_274_406_912
    # the fitted vLLM load overhead: 24 layers · 32 experts · 870,318 B
    overhead = _ledger(arch, constants=DEFAULT_CONSTANTS)
    per_expert = DEFAULT_CONSTANTS.mxfp4_load_overhead_bytes_per_expert
    assert overhead["weights: MXFP4 load overhead (vLLM)"] == 768 * per_expert


def test_fp8_online_and_per_channel() -> None:
    # --quantization fp8 on a bf16 checkpoint: 1 B per element + one fp32 scale per matrix.
    # Llama-3.1-8B layer: 218,103,808 B + 7 matrices · 4 B = 218,103,836 B · 32
    arch = _arch("meta-llama--Llama-3.1-8B.json")
    ledger = _ledger(arch, quantization="fp8")
    assert ledger["attention"] + ledger["mlp_dense"] == 218_103_836 * 32
    # per-channel fp8 (compressed-tensors strategy "channel"): + 4 B per output row
    fmt = WeightFormat(kind=FormatKind.FP8_CHANNEL, label="fp8 channel", bits=8)
    assert fmt.tensor_bytes(1024, 4096) == 1024 * 4096 + 4 * 1024


def test_nvfp4_bytes() -> None:
    # 64 x 64 NVFP4: 64·64/2 = 2,048 B values + 64 · (64/16) = 256 B fp8 block scales
    # + 8 B (fp32 weight_scale_2 and input_scale) = 2,312 B
    fmt = WeightFormat(kind=FormatKind.NVFP4, label="nvfp4", bits=4)
    assert fmt.tensor_bytes(64, 64) == 2_312


def test_ignore_list_keeps_modules_unquantized() -> None:
    # compressed-tensors fp8 per-channel with every self_attn ignored by regex: attention
    # stays bf16 (2,684,354,560 B as in the bf16 ledger), the MLP is fp8:
    # 176,160,768 B + 4 · (14336 + 14336 + 4096) scales = 176,291,840 B per layer · 32
    quant = {
        "quant_method": "compressed-tensors",
        "ignore": ["lm_head", "re:.*self_attn.*"],
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            }
        },
    }
    arch = _arch("meta-llama--Llama-3.1-8B.json", quantization_config=quant)
    ledger = _ledger(arch)
    assert ledger["attention"] == 2_684_354_560
    assert ledger["mlp_dense"] == 176_291_840 * 32


@pytest.mark.parametrize(
    ("module", "patterns", "expected"),
    [
        ("model.layers.7.self_attn.k_proj", ("model.layers.*.self_attn",), True),
        ("lm_head", ("lm_head",), True),
        ("model.layers.0.mlp.gate", ("gate",), True),
        ("model.layers.0.mlp.gate_proj", ("gate",), False),
        ("model.layers.0.mlp.down_proj", ("re:.*mlp.down.*",), True),
        ("model.layers.0.mlp.experts", ("model.layers.1",), False),
    ],
)
def test_ignore_patterns(module: str, patterns: tuple[str, ...], expected: bool) -> None:
    assert is_unquantized_module(module, patterns) is expected


def test_inventory_tied_head_gets_copy_on_last_stage_only_with_pp() -> None:
    arch = _arch("meta-llama--Llama-3.2-1B-Instruct.json")
    res = resolve_deployment(arch, H200, Deployment(max_model_len=4096, pipeline_parallel_size=2))
    ranges = pp_layer_ranges(len(arch.layers), 2)
    last = stage_tensors(arch, res, ranges[1], first=False, last=True)
    assert [t.component for t in last].count("lm_head") == 1
    res1 = resolve_deployment(arch, H200, Deployment(max_model_len=4096))
    single = stage_tensors(arch, res1, range(len(arch.layers)), first=True, last=True)
    assert [t.component for t in single].count("lm_head") == 0
