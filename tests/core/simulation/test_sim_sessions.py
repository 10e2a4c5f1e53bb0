"""Multi-turn sessions in the simulator: a hand trace of two sessions of two turns each.

Constant 1 s steps, a token budget of 4 per step (so a prompt of ``P`` uncached tokens takes
``ceil(P / 4)`` steps when alone), blocks of 4 tokens, vLLM v1 scheduling (running requests
first, then waiting ones in arrival order, chunked). A turn's first token comes at the end of
the step that computes its last prompt token; each further token takes one step.

Session A starts at 0: turn 1 sends 6 tokens and gets 2; turn 2 is sent 1 s after turn 1 ends
with 3 new tokens, so its prompt is 6 + 2 + 3 = 11; it gets 2 tokens. Session B starts at 1.5:
turn 1 sends 3 and gets 3; turn 2 is sent 0.5 s after it ends with 1 new token (prompt
3 + 3 + 1 = 7) and gets 1.

With prefix caching (hand trace):

====  ===========================================================================
t     step
====  ===========================================================================
0     A1 prefill 4 of 6
1     A1 prefill 2 → A1 token 1 at 2
2     A1 decode (1) + B1 prefill 3 → A1 token 2 at 3: A1 ends at 3; B1 token 1 at 3
3     B1 decode → token 2 at 4. A2 is sent at 3 + 1 = 4
4     B1 decode (1) + A2: A1 computed 6 + 2 − 1 = 7 tokens, one full block (4 tokens)
      cached, so A2 hits 4 and prefills 3 of its other 7 → B1 ends at 5; B2 sent at 5.5
5     A2 prefill 4 → A2 token 1 at 6
6     A2 decode (1) + B2: B1 computed 3 + 3 − 1 = 5, one block cached, B2 hits 4 and
      prefills its other 3 → A2 ends at 7, B2's one token at 7
====  ===========================================================================

Without caching A2 prefills all 11 tokens: [4, 5) 3 tokens, [5, 6) 4, [6, 7) 4 (B2, sent at
5.5, waits: the budget is full) → A2 token 1 at 7; [7, 8) A2 decode + B2 prefill 3 of 7 → A2
ends at 8; [8, 9) B2 prefill 4 → B2 token 1 and end at 9.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from servesize.core.simulation import ConstantStepTime, SchedulerConfig, simulate
from servesize.core.traffic import PrefixAssignment
from servesize.core.traffic.sessions import SessionWorkload

_PROMPT = [6, 11, 3, 7]  # A1, A2, B1, B2 (ids run session by session)
_OUTPUT = [2, 2, 3, 1]


def _workload() -> SessionWorkload:
    prompt = np.array(_PROMPT, dtype=np.int64)
    output = np.array(_OUTPUT, dtype=np.int64)
    session = np.array([0, 0, 1, 1], dtype=np.int64)
    return SessionWorkload(
        session=session,
        turn=np.array([0, 1, 0, 1], dtype=np.int64),
        session_start_s=np.array([0.0, 1.5]),
        think_time_s=np.array([0.0, 1.0, 0.0, 0.5]),
        prompt_tokens=prompt,
        output_tokens=output,
        timeout_s=np.full(4, math.inf),
        nominal_rate_per_s=1.0,
        prefix=PrefixAssignment(group=session.copy(), shared_tokens=prompt + output),
    )


def _run(caching: str, skip: bool) -> object:
    config = SchedulerConfig(
        max_num_batched_tokens=4,
        max_num_seqs=16,
        block_size_tokens=4,
        num_kv_blocks=64,
        policy="vllm_v1",
        prefix_caching=caching,  # type: ignore[arg-type]
    )
    return simulate(_workload(), config, ConstantStepTime(1.0), skip_decode_runs=skip)


@pytest.mark.parametrize("skip", [True, False])
def test_two_sessions_two_turns_with_prefix_caching(skip: bool) -> None:
    r = _run("free_queue_lru", skip)
    assert r.arrival_s.tolist() == [0.0, 4.0, 1.5, 5.5]  # type: ignore[attr-defined]
    assert r.first_token_s.tolist() == [2.0, 6.0, 3.0, 7.0]  # type: ignore[attr-defined]
    assert r.finish_s.tolist() == [3.0, 7.0, 5.0, 7.0]  # type: ignore[attr-defined]
    assert r.prefix_hit_tokens.tolist() == [0, 4, 0, 4]  # type: ignore[attr-defined]


@pytest.mark.parametrize("skip", [True, False])
def test_two_sessions_two_turns_without_caching(skip: bool) -> None:
    r = _run("off", skip)
    assert r.arrival_s.tolist() == [0.0, 4.0, 1.5, 5.5]  # type: ignore[attr-defined]
    assert r.first_token_s.tolist() == [2.0, 7.0, 3.0, 9.0]  # type: ignore[attr-defined]
    assert r.finish_s.tolist() == [3.0, 8.0, 5.0, 9.0]  # type: ignore[attr-defined]


def test_a_turn_waits_for_the_previous_answer_and_the_think_time() -> None:
    """Every later turn is sent exactly its think time after its predecessor left."""
    r = _run("free_queue_lru", True)
    exit_s, arrival = r.exit_s, r.arrival_s  # type: ignore[attr-defined]
    assert arrival[1] == exit_s[0] + 1.0
    assert arrival[3] == exit_s[2] + 0.5
