"""Hybrid Mamba/attention and pure state-space models, counted by hand layer by layer.

Configs are the catalogue files in ``servesize/data/models/``:

- ``ai21labs--AI21-Jamba-1.5-Mini.json``: the published config.json as reproduced in a public
  test helper (``get_ai21_jamba_15_mini``, citing huggingface.co/ai21labs/AI21-Jamba-1.5-Mini);
- ``nvidia--Nemotron-H-8B-Base-8K.json``: the published config.json as reproduced in
  Megatron-Bridge's ``TestNemotronHBridge.nemotronh_8b_config_dict``;
- ``ibm-ai-platform--Bamba-9B.json``: ``BambaConfig`` defaults (transformers
  ``configuration_bamba.py``) with the checkpoint's ``attn_layer_indices [9, 18, 27]``,
  ``mamba_d_head 64``, ``mamba_d_state 128``, ``mamba_n_groups 1`` (the values the Bamba
  conversion script sets) and the Llama-3 vocabulary of 128,256;
- ``state-spaces--mamba2-2.7b.json``: the HF ``Mamba2Config`` spelling of the mamba_ssm
  checkpoint (``d_model 2560``, ``n_layer 64``, ``vocab 50277`` padded to a multiple of 16 =
  50,288, ``d_state 128``, ``headdim 64``, ``expand 2``, ``ngroups 1``, tied embeddings).

Tolerances against the model cards: the cards round (52B, 12B, 8B, 9B, 2.7B), so each count must
be within 2 % of the card where it states one figure, or inside the class the name gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servesize.core.architecture import (
    AttentionKind,
    DenseMlp,
    MambaMixer,
    MoeMlp,
    count_parameters,
    kv_footprint,
    mixer_parameters,
    parse_architecture,
    state_bytes_per_sequence,
)
from servesize.core.errors import InvalidArchitectureError
from servesize.core.memory import kv_layer_specs
from servesize.core.memory.kv_format import resolve_kv_format

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MODELS / f"{name}.json").read_text())
    return data


def _arch(name: str) -> Any:
    return parse_architecture(_config(name), name=name)


def test_jamba_mini_layout_params_and_cache() -> None:
    """Jamba 1.5 Mini: h=4096, L=32, V=65536 untied; attention where i % 8 == 4 (4 layers),
    Mamba-1 elsewhere (28); MoE where i % 2 == 1 (16 layers, 16 experts, top 2).

    Mamba-1 layer (D_i = 2*4096 = 8192, N=16, R=256, k=4):
      in_proj 4096*16384 = 67,108,864; conv1d 8192*4 + 8192 = 40,960;
      x_proj 8192*(256+32) = 2,359,296; dt_proj 256*8192 + 8192 = 2,105,344;
      A_log 8192*16 = 131,072; D 8,192; out_proj 8192*4096 = 33,554,432;
      dt/B/C norms 256+16+16 = 288                      -> 105,308,448; x28 = 2,948,636,544
    attention (H=32, H_kv=8, D=128): 2*4096*4096 + 2*4096*1024 = 41,943,040; x4 = 167,772,160
    expert 3*4096*14336 = 176,160,768; MoE layer 16 experts + router 4096*16
                                                        = 2,818,637,824; x16 = 45,098,205,184
    dense MLP x16                                       = 2,818,572,288
    norms 32*2*4096 + 4096                              = 266,240
    embedding + lm_head 2*65536*4096                    = 536,870,912
    total                                               = 51,570,323,328 (card: 52B, -0.8 %)
    active: total - 16*16*176,160,768 + 16*2*176,160,768 = 12,110,311,296 (card: 12B, +0.9 %)
    """
    arch = _arch("ai21labs--AI21-Jamba-1.5-Mini")
    kinds = [layer.mixer.kind for layer in arch.layers]
    assert [i for i, k in enumerate(kinds) if k is AttentionKind.FULL] == [4, 12, 20, 28]
    assert kinds.count(AttentionKind.MAMBA) == 28
    moe = [i for i, layer in enumerate(arch.layers) if isinstance(layer.mlp, MoeMlp)]
    assert moe == list(range(1, 32, 2))
    assert mixer_parameters(arch.layers[0].mixer, 4096) == 105_308_448
    counts = count_parameters(arch)
    assert counts.total == 51_570_323_328
    assert counts.active == 12_110_311_296
    assert abs(counts.total / 52e9 - 1) < 0.02
    assert abs(counts.active / 12e9 - 1) < 0.02
    # KV only in the 4 attention layers: 4 * 2 * 8 * 128 * 2 B. A Llama reading of the config
    # would count all 32 layers (131,072 B, 8x).
    assert kv_footprint(arch, "bf16").bytes_per_token == 16_384
    # Mamba-1 state (vLLM mamba1_state_shape): conv 3*8192 + SSM 8192*16 = 155,648 elements,
    # 311,296 B in bf16; 28 layers = 8,716,288 B per sequence whatever its length.
    assert state_bytes_per_sequence(arch, "bf16") == 8_716_288


def test_nemotron_h_8b_blocks_params_and_cache() -> None:
    """Nemotron-H-8B: 52 blocks "M-M-M-M*-..." = 24 M, 4 *, 24 -; each mixer with the MLP block
    after it is one decoder layer: 20 Mamba+MLP, 4 Mamba followed by "*" (no MLP) and 4
    attention+MLP, so 28 layers and 24 MLPs.

    Mamba-2 (H=128, P=64, D_i=8192, G=8, N=128, k=4):
      in_proj 4096*(2*8192 + 2*8*128 + 128 = 18,560) = 76,021,760;
      conv1d C = 8192 + 2048 = 10,240: 10,240*4 + 10,240 = 51,200; dt_bias, A_log, D 3*128;
      norm 8,192; out_proj 8192*4096 = 33,554,432      -> 109,635,968; x24 = 2,631,263,232
    attention x4                                        = 167,772,160
    relu2 MLP 2*4096*21504 = 176,160,768; x24           = 4,227,858,432
    norms one per block 52*4096 + final 4096            = 217,088
    embedding + lm_head 2*131072*4096                   = 1,073,741,824
    total                                               = 8,100,852,736 (card: 8B, +1.3 %)
    """
    arch = _arch("nvidia--Nemotron-H-8B-Base-8K")
    assert len(arch.layers) == 28
    kinds = [layer.mixer.kind for layer in arch.layers]
    assert kinds.count(AttentionKind.MAMBA) == 24
    assert kinds.count(AttentionKind.FULL) == 4
    empty = [i for i, layer in enumerate(arch.layers) if layer.mlp == DenseMlp(intermediate_size=0)]
    assert len(empty) == 4
    assert all(arch.layers[i + 1].mixer.kind is AttentionKind.FULL for i in empty)
    counts = count_parameters(arch)
    assert counts.total == 8_100_852_736
    assert abs(counts.total / 8e9 - 1) < 0.02
    assert kv_footprint(arch, "bf16").bytes_per_token == 4 * 2 * 8 * 128 * 2
    # conv 3*10,240 = 30,720 + SSM 128*64*128 = 1,048,576 -> 2,158,592 B bf16; x24
    assert state_bytes_per_sequence(arch, "bf16") == 51_806_208


def test_bamba_9b_params_and_cache() -> None:
    """Bamba-9B: attention at 9, 18, 27; Mamba-2 (H=128, P=64, G=1, N=128) elsewhere (29).

    Mamba-2: in_proj 4096*(16384 + 256 + 128) = 68,681,728; conv (8192+256)*5 = 42,240; 384;
      norm 8,192; out_proj 33,554,432                  -> 102,286,976; x29 = 2,966,322,304
    attention x3 = 125,829,120; gated MLP 32*176,160,768 = 5,637,144,576;
    norms 32*8192 + 4096 = 266,240; embedding + head 2*128256*4096 = 1,050,673,152
    total = 9,780,235,392 (the "9B" class: between 9 and 10 B)
    """
    arch = _arch("ibm-ai-platform--Bamba-9B")
    attention = [i for i, x in enumerate(arch.layers) if x.mixer.kind is AttentionKind.FULL]
    assert attention == [9, 18, 27]
    counts = count_parameters(arch)
    assert counts.total == 9_780_235_392
    assert 9e9 <= counts.total < 10e9
    # conv 3*8448 = 25,344 + SSM 1,048,576 = 1,073,920 elements -> 2,147,840 B; x29
    assert state_bytes_per_sequence(arch, "bf16") == 62_287_360
    assert kv_footprint(arch, "bf16").bytes_per_token == 3 * 2 * 8 * 128 * 2


def test_mamba2_2_7b_params_and_state() -> None:
    """mamba2-2.7b: h=2560, L=64, H=80, P=64 (D_i=5120), G=1, N=128, V=50288 tied.

    in_proj 2560*(10240 + 256 + 80) = 27,074,560; conv (5120+256)*5 = 26,880; 3*80 = 240;
    norm 5,120; out_proj 5120*2560 = 13,107,200         -> 40,214,000; x64 = 2,573,696,000
    norms 64*2560 + 2560 = 166,400; embedding 50288*2560 = 128,737,280 (tied head)
    total = 2,702,599,680 (card: 2.7B, +0.1 %)
    """
    arch = _arch("state-spaces--mamba2-2.7b")
    assert {layer.mixer.kind for layer in arch.layers} == {AttentionKind.MAMBA}
    counts = count_parameters(arch)
    assert counts.total == 2_702_599_680
    assert abs(counts.total / 2.7e9 - 1) < 0.02
    assert kv_footprint(arch, "fp16").bytes_per_token == 0
    # conv 3*5376 = 16,128 + SSM 80*64*128 = 655,360 = 671,488 elements * 2 B * 64 layers
    assert state_bytes_per_sequence(arch, "fp16") == 85_950_464


def test_qwen3_next_against_its_card() -> None:
    """Qwen3-Next-80B-A3B: card 80B total, 3B activated (the catalogue's exact counts are in
    test_arch_params); here only the tolerance against the card and the GDN-only state."""
    arch = _arch("Qwen--Qwen3-Next-80B-A3B-Thinking")
    counts = count_parameters(arch)
    assert abs(counts.total / 80e9 - 1) < 0.02
    assert 3e9 <= counts.active_excluding_embedding < 4e9
    assert {layer.mixer.kind for layer in arch.layers} == {
        AttentionKind.FULL,
        AttentionKind.LINEAR,
    }


def test_mamba1_hf_config_counted_by_hand() -> None:
    """HF ``MambaConfig`` (mamba-130m-hf shape, shrunk): h=8, D_i=16, N=4, R=ceil(8/16)=1, k=4.

    in_proj 8*32 = 256; conv 16*4 + 16 = 80; x_proj 16*(1+8) = 144; dt_proj 1*16 + 16 = 32;
    A_log 16*4 = 64; D 16; out_proj 16*8 = 128 -> 720 per layer (no inner norms).
    2 layers 1,440 + norms 2*8 + 8 = 24 + tied embedding 10*8 = 80 -> 1,544.
    State: conv 3*16 + SSM 16*4 = 112 elements per layer.
    """
    config = {
        "model_type": "mamba",
        "hidden_size": 8,
        "num_hidden_layers": 2,
        "state_size": 4,
        "expand": 2,
        "conv_kernel": 4,
        "time_step_rank": "auto",
        "vocab_size": 10,
    }
    arch = parse_architecture(config, name="tiny-mamba")
    mixer = arch.layers[0].mixer
    assert isinstance(mixer, MambaMixer)
    assert (mixer.version, mixer.dt_rank) == (1, 1)
    assert mixer_parameters(mixer, 8) == 720
    assert count_parameters(arch).total == 1_544
    assert state_bytes_per_sequence(arch, "fp32") == 2 * 112 * 4


def test_ssm_cache_dtype_from_the_config_prices_the_state() -> None:
    """``mamba_ssm_cache_dtype: float32`` (Nemotron-Nano-v2 style) keeps the conv state in the
    model dtype and the SSM state in fp32: 24 * (30,720 * 2 + 1,048,576 * 4) B."""
    config = _config("nvidia--Nemotron-H-8B-Base-8K") | {"mamba_ssm_cache_dtype": "float32"}
    arch = parse_architecture(config, name="nemotron-fp32-state")
    assert state_bytes_per_sequence(arch, "bf16") == 24 * (30_720 * 2 + 1_048_576 * 4)


def _pointers(config: dict[str, Any]) -> set[str]:
    with pytest.raises(InvalidArchitectureError) as caught:
        parse_architecture(config, name="bad")
    return {issue.field for issue in caught.value.issues}


def test_unknown_family_with_state_space_fields_is_refused() -> None:
    config = {
        "model_type": "zamba2",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
        "mamba_d_state": 16,
        "hybrid_layer_ids": [1],
    }
    assert _pointers(config) == {"/mamba_d_state", "/hybrid_layer_ids"}
    # The native mamba_ssm spelling (no model_type, ssm_cfg) is refused the same way instead
    # of failing on a missing num_attention_heads.
    native = {"d_model": 2560, "n_layer": 64, "vocab_size": 50277, "ssm_cfg": {"layer": "Mamba2"}}
    assert "/ssm_cfg" in _pointers(native)


def test_bad_hybrid_layouts_name_the_field() -> None:
    nemotron = _config("nvidia--Nemotron-H-8B-Base-8K")
    assert "/hybrid_override_pattern/3" in _pointers(
        nemotron | {"hybrid_override_pattern": "M-MX" + "M-" * 24}
    )
    assert "/hybrid_override_pattern" in _pointers(nemotron | {"hybrid_override_pattern": "M-"})
    jamba = _config("ai21labs--AI21-Jamba-1.5-Mini")
    assert "/attn_layer_offset" in _pointers(jamba | {"attn_layer_offset": 8})
    bamba = _config("ibm-ai-platform--Bamba-9B")
    assert "/attn_layer_indices" in _pointers(bamba | {"attn_layer_indices": [40]})
    assert "/mamba_n_heads" in _pointers(bamba | {"mamba_d_head": 32})


def test_mamba2_state_per_gpu_replicates_a_single_group_under_tp() -> None:
    """Bamba-9B at TP=2 (vLLM ``extra_groups_for_head_shards``: G=1 is replicated, G'=2):
    conv channels (8192 + 2*2*128) / 2 = 4,352 -> 3*4,352 = 13,056; SSM 64*64*128 = 524,288;
    (13,056 + 524,288) * 2 B = 1,074,688 B per layer and sequence per GPU."""
    arch = _arch("ibm-ai-platform--Bamba-9B")
    kv = resolve_kv_format("auto", arch.weight_dtype)
    assert kv is not None
    specs = {s.kind: s for s in kv_layer_specs(arch, range(32), 2, kv, "bf16")}
    assert specs["mamba"].layers == 29
    assert specs["mamba"].state_bytes == 1_074_688
    # Attention: 2 * (8/2) * 128 * 2 B per token per layer.
    assert specs["full_attention"].bytes_per_token == 2_048
