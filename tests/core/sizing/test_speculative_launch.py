"""The engines' speculative options parse under the engines' own option tables."""

from __future__ import annotations

import json

import pytest

from servesize.core.speculative import (
    SpeculativeDecoding,
    sglang_speculative_args,
    trtllm_speculative_config,
    vllm_speculative_args,
)
from tests.core.sizing.test_engine_commands import SGLANG, TRTLLM_DOC, VLLM

EAGLE = SpeculativeDecoding.of(
    "eagle3", 3, acceptance_rate=0.8, draft_model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
)


@pytest.mark.parametrize("method", ["eagle3", "mtp", "ngram", "draft_model"])
def test_vllm_speculative_config_parses(method: str) -> None:
    spec = SpeculativeDecoding.of(method, 4, acceptance_rate=0.7, draft_model="org/draft")  # type: ignore[arg-type]
    argv = ["meta-llama/Llama-3.1-8B", *vllm_speculative_args(spec)]
    parsed = VLLM.parse_args(argv)
    config = parsed.speculative_config
    config = json.loads(config) if isinstance(config, str) else config
    assert config["method"] == method
    assert config["num_speculative_tokens"] == 4
    assert ("model" in config) == (method in ("eagle3", "draft_model"))


def test_sglang_eagle3_flags_parse() -> None:
    args = sglang_speculative_args(EAGLE)
    assert args is not None
    parsed = SGLANG.parse_args(["--model-path", "meta-llama/Llama-3.1-8B", *args])
    assert parsed.speculative_algorithm == "EAGLE3"
    assert parsed.speculative_draft_model_path == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert (parsed.speculative_num_steps, parsed.speculative_eagle_topk) == (3, 1)
    assert parsed.speculative_num_draft_tokens == 4  # k drafts + the root


def test_sglang_mtp_is_nextn_and_ngram_has_no_flag() -> None:
    mtp = sglang_speculative_args(SpeculativeDecoding.of("mtp", 1, acceptance_rate=0.8))
    assert mtp is not None
    assert SGLANG.parse_args(["--model-path", "m", *mtp]).speculative_algorithm == "NEXTN"
    assert sglang_speculative_args(SpeculativeDecoding.of("ngram", 3, acceptance_rate=0.5)) is None


def test_trtllm_speculative_config_is_an_llm_args_key() -> None:
    assert "speculative_config" in json.dumps(TRTLLM_DOC["llm_args"])
    assert trtllm_speculative_config(EAGLE)["decoding_type"] == "Eagle"
    assert trtllm_speculative_config(EAGLE)["max_draft_len"] == 3
