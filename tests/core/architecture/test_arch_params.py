"""Parameter counts worked out by hand from the published architectures.

Each expected number below is derived in the comment above it from the config fields, not
taken from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import (
    GatedDeltaNet,
    LatentAttention,
    MultiHeadAttention,
    count_parameters,
    mixer_parameters,
    parse_architecture,
)

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _config(filename: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MODELS / filename).read_text())
    return data


def test_llama_3_1_8b_total_is_exact() -> None:
    # h=4096, L=32, H=32, H_kv=8, D=128, I=14336, V=128256, untied, no biases.
    # attention per layer: q 4096*4096 + k 4096*1024 + v 4096*1024 + o 4096*4096 = 41,943,040
    # MLP per layer: 3 * 4096 * 14336                                              = 176,160,768
    # norms per layer: 2 * 4096                                                    = 8,192
    # layer = 218,112,000; 32 layers                                               = 6,979,584,000
    # embedding + lm_head: 2 * 128256 * 4096                                       = 1,050,673,152
    # final norm                                                                   = 4,096
    # total                                                                        = 8,030,261,248
    arch = parse_architecture(_config("meta-llama--Llama-3.1-8B.json"), name="Llama-3.1-8B")
    counts = count_parameters(arch)
    assert counts.total == 8_030_261_248
    assert counts.attention == 32 * 41_943_040
    assert counts.mlp_dense == 32 * 176_160_768
    assert counts.norms == 32 * 8_192 + 4_096
    assert counts.embedding == counts.lm_head == 525_336_576
    assert counts.active == counts.total  # dense: every parameter is used by every token


# DeepSeek-V2-Lite config.json fields (deepseek-ai/DeepSeek-V2-Lite): MLA without a query
# bottleneck (q_lora_rank null), one dense layer, then 26 MoE layers of 64 routed + 2 shared
# experts, top-6, greedy routing (no score-correction bias).
V2_LITE: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "vocab_size": 102400,
    "q_lora_rank": None,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "moe_intermediate_size": 1408,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "topk_method": "greedy",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_deepseek_v2_lite_mla_without_query_lora() -> None:
    # MLA per layer: q_proj 2048*16*(128+64)         = 6,291,456
    #   kv_a_proj_with_mqa 2048*(512+64)             = 1,179,648
    #   kv_a_layernorm                               = 512
    #   kv_b_proj 512*16*(128+128)                   = 2,097,152
    #   o_proj 16*128*2048                           = 4,194,304
    #   total                                        = 13,763,072
    # layer 0 (dense): 13,763,072 + 3*2048*10944 (67,239,936) + norms 4,096 = 81,007,104
    # one expert 3*2048*1408 = 8,650,752; 64 routed = 553,648,128
    # shared: 3*2048*(2*1408) = 17,301,504; router 2048*64 = 131,072
    # MoE layer: 13,763,072 + 553,648,128 + 17,301,504 + 131,072 + 4,096 = 584,847,872
    # total = 81,007,104 + 26*584,847,872 + 2*102400*2048 + 2048 = 15,706,484,224
    # active without the embedding (DeepSeek convention), per MoE layer:
    #   13,763,072 + 6*8,650,752 + 17,301,504 + 131,072 + 4,096 = 83,104,256
    #   81,007,104 + 26*83,104,256 + lm_head 209,715,200 + 2,048 = 2,451,435,008
    arch = parse_architecture(V2_LITE, name="DeepSeek-V2-Lite")
    mla = arch.layers[0].mixer
    assert isinstance(mla, LatentAttention)
    assert mla.q_lora_rank is None
    assert mixer_parameters(mla, 2048) == 13_763_072
    counts = count_parameters(arch)
    assert counts.total == 15_706_484_224
    assert counts.active_excluding_embedding == 2_451_435_008
    assert counts.router == 26 * 131_072


def test_deepseek_v3_mtp_module_is_counted_separately() -> None:
    # One MTP module = one MoE decoder layer + eh_proj (2h -> h) + 3 norms (h each).
    # MLA with q_lora_rank=1536: q_a 7168*1536 (11,010,048) + q_a_norm 1536
    #   + q_b 1536*128*192 (37,748,736) + kv_a 7168*576 (4,128,768) + kv_a_norm 512
    #   + kv_b 512*128*256 (16,777,216) + o 128*128*7168 (117,440,512) = 187,107,328
    # MoE: 256 experts * 3*7168*2048 (44,040,192) = 11,274,289,152; 1 shared = 44,040,192;
    #   router 7168*256 + score-correction bias 256 = 1,835,264; norms 2*7168 = 14,336
    # layer = 11,507,286,272; + eh_proj 2*7168*7168 (102,760,448) + 3*7168 = 11,610,068,224
    arch = parse_architecture(_config("deepseek-ai--DeepSeek-V3.json"), name="DeepSeek-V3")
    assert len(arch.mtp_layers) == 1
    counts = count_parameters(arch)
    assert counts.mtp == 11_610_068_224
    assert counts.total == 671_026_419_200  # main model only; MTP not included


def test_gpt_oss_20b_biases_and_sinks() -> None:
    # h=2880, L=24, H=64, H_kv=8, D=64, 32 experts (top-4) of width 2880, V=201088, untied.
    # attention (bias on q, k, v, o; 64 sink logits):
    #   q 2880*4096+4096 = 11,800,576; k, v 2880*512+512 = 1,475,072 each;
    #   o 4096*2880+2880 = 11,799,360; sinks 64                     -> 26,550,144
    # expert: gate_up 2880*5760 + 5760, down 2880*2880 + 2880       -> 24,891,840
    # router 2880*32 + 32 = 92,192; norms 2*2880 = 5,760
    # layer = 26,550,144 + 32*24,891,840 + 92,192 + 5,760 = 823,186,976
    # total = 24*823,186,976 + 2*201088*2880 + 2880 = 20,914,757,184
    # active w/o embedding: 24*(26,550,144 + 4*24,891,840 + 92,192 + 5,760)
    #   + lm_head 579,133,440 + 2880 = 3,608,307,264
    arch = parse_architecture(_config("openai--gpt-oss-20b.json"), name="gpt-oss-20b")
    attention = arch.layers[0].mixer
    assert isinstance(attention, MultiHeadAttention)
    assert attention.sinks
    assert attention.qkv_bias
    assert attention.o_bias
    assert mixer_parameters(attention, 2880) == 26_550_144
    counts = count_parameters(arch)
    assert counts.total == 20_914_757_184
    assert counts.active_excluding_embedding == 3_608_307_264


def test_qwen3_next_hybrid_layers() -> None:
    # Gated attention (full layers): q_proj doubled for the output gate 2048*(16*256*2)
    #   = 16,777,216; k, v 2048*(2*256) = 1,048,576 each; o 4096*2048 = 8,388,608;
    #   q/k norms 2*256                                                  -> 27,263,488
    # Gated delta-net: K = 16*128 = 2048, V = 32*128 = 4096, conv channels 2K+V = 8192
    #   in_proj_qkvz 2048*(2K+2V) = 25,165,824; in_proj_ba 2048*64 = 131,072;
    #   conv1d 8192*4 = 32,768; dt_bias + A_log 2*32 = 64; norm 128; out_proj 4096*2048
    #   = 8,388,608                                                      -> 33,718,464
    arch = parse_architecture(
        _config("Qwen--Qwen3-Next-80B-A3B-Thinking.json"), name="Qwen3-Next-80B-A3B"
    )
    full, linear = arch.layers[3].mixer, arch.layers[0].mixer
    assert isinstance(full, MultiHeadAttention)
    assert full.output_gate
    assert isinstance(linear, GatedDeltaNet)
    assert mixer_parameters(full, 2048) == 27_263_488
    assert mixer_parameters(linear, 2048) == 33_718_464
    # MoE per layer: 512 experts * 3*2048*512 + shared 3*2048*512 + router 2048*512
    #   + shared-expert gate 2048
    counts = count_parameters(arch)
    assert counts.experts_routed == 48 * 512 * 3_145_728
    assert counts.experts_shared == 48 * 3_145_728
    assert counts.router == 48 * (1_048_576 + 2048)


def test_falcon_7b_mqa_fused_qkv_and_layernorm_bias() -> None:
    # h=4544, H=71, D=64, one KV head (multi_query), plain GELU MLP of 4h, no linear biases,
    # one LayerNorm (weight + bias) per layer, tied embeddings.
    # query_key_value 4544*(71+2)*64 = 21,229,568; dense 4544*4544 = 20,647,936
    # mlp 2*4544*18176 = 165,183,488; input_layernorm 2*4544 = 9,088
    # layer = 207,070,080; total = 32*207,070,080 + 65024*4544 + ln_f 9,088 = 6,921,720,704
    arch = parse_architecture(_config("tiiuae--falcon-7b-instruct.json"), name="falcon-7b")
    assert count_parameters(arch).total == 6_921_720_704


def test_qwen2_qkv_bias_without_output_bias() -> None:
    # Qwen2.5-7B: q/k/v carry biases, o_proj does not.
    # h=3584, H=28, H_kv=4, D=128: q 3584*3584 + 3584, k and v 3584*512 + 512, o 3584*3584
    arch = parse_architecture(_config("Qwen--Qwen2.5-7B-Instruct.json"), name="Qwen2.5-7B")
    attention = arch.layers[0].mixer
    expected = (3584 * 3584 + 3584) + 2 * (3584 * 512 + 512) + 3584 * 3584
    assert mixer_parameters(attention, 3584) == expected


@pytest.mark.parametrize(
    ("filename", "expected_embedding", "expected_lm_head"),
    [
        ("google--gemma-2-9b.json", 256000 * 3584, 0),  # tied (Gemma default)
        ("meta-llama--Llama-3.2-1B-Instruct.json", 128256 * 2048, 0),  # tied in the config
        ("mistralai--Mistral-7B-v0.3.json", 32768 * 4096, 32768 * 4096),  # untied
    ],
)
def test_tied_embeddings(filename: str, expected_embedding: int, expected_lm_head: int) -> None:
    counts = count_parameters(parse_architecture(_config(filename), name=filename))
    assert (counts.embedding, counts.lm_head) == (expected_embedding, expected_lm_head)
