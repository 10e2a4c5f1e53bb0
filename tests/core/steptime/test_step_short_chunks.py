"""A short prefill chunk after a long cached context costs little, with or without tables.

Regression: the measured context-attention table was scaled by the roofline ratio of the
cached-context chunk to the table's uncached one, which for one token after 8,191 cached is
~8,000×, charging the kernel's fixed cost thousands of times (8.5 s for one step).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from servesize.calibration import load_measured_profile
from servesize.core.architecture import parse_architecture
from servesize.core.hardware import datasheet_spec
from servesize.core.steptime import StepWork, build_step_model

ROOT = Path(__file__).resolve().parents[3]


def test_one_token_after_a_long_context_is_cheaper_than_the_whole_prompt() -> None:
    config = json.loads(
        (ROOT / "servesize" / "data" / "models" / "meta-llama--Llama-3.1-70B.json").read_text()
    )
    gpus = json.loads((ROOT / "servesize" / "data" / "gpus.json").read_text())["gpus"]
    h100 = datasheet_spec(next(g for g in gpus if g["name"] == "H100 SXM"))
    arch = parse_architecture(config, name="llama-70b")
    work = StepWork.mixed(
        prefill_tokens=np.array([1.0, 8192.0]),
        prefill_sequences=np.array([1.0, 1.0]),
        prefill_cached_tokens=np.array([8191.0, 0.0]),
        decode_sequences=np.array([3.0, 0.0]),
        decode_context_tokens=np.array([8200.0, 0.0]),
    )
    for measured in (None, load_measured_profile()):
        model = build_step_model(
            arch, h100, engine="vllm", tensor_parallel_size=4, weight_dtype="fp8", measured=measured
        )
        short, whole = model.step_time(work).total_s
        assert short < whole / 5
        # The short step reads the weights once (70.6e9 fp8 parameters / 4 GPUs at 3.35 TB/s
        # is 5.3 ms) and attends 8,192 cached tokens: tens of milliseconds at most.
        assert short < 0.1
