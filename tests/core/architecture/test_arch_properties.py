"""Property tests: counts scale as the formulas say, and bad input only ever raises
InvalidArchitectureError."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servesize.core.architecture import (
    Architecture,
    count_parameters,
    flops_profile,
    kv_footprint,
    parse_architecture,
    summarize,
)
from servesize.core.errors import InvalidArchitectureError

MODELS = Path(__file__).resolve().parents[3] / "servesize" / "data" / "models"
CATALOGUE: dict[str, dict[str, Any]] = {
    path.name: json.loads(path.read_text()) for path in sorted(MODELS.glob("*.json"))
}
FIELDS = sorted(
    {key for config in CATALOGUE.values() for key in config}
    | {key for config in CATALOGUE.values() for key in config.get("text_config", {})}
)

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
SMALL_INTS = st.integers(min_value=-3, max_value=5000)

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _parse(config: Any) -> Architecture | InvalidArchitectureError:
    try:
        return parse_architecture(config, name="fuzz")
    except InvalidArchitectureError as error:
        return error


def _parse_or_reject(config: Any) -> None:
    """Parsing either succeeds (and every derived fact is computable) or raises the domain error."""
    result = _parse(config)
    if isinstance(result, InvalidArchitectureError):
        assert result.issues
        assert all(issue.field.startswith("/") for issue in result.issues)
        return
    summary = summarize(result)
    assert summary.parameters_total >= summary.parameters_active > 0
    flops_profile(result).prefill_flops(17, 3)


@PROPERTY_SETTINGS
@given(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES | SMALL_INTS, max_size=25))
def test_random_documents_raise_only_the_domain_error(config: dict[str, Any]) -> None:
    _parse_or_reject(config)


@PROPERTY_SETTINGS
@given(JSON_VALUES)
def test_any_json_value_raises_only_the_domain_error(value: Any) -> None:
    _parse_or_reject(value)


@PROPERTY_SETTINGS
@given(
    name=st.sampled_from(sorted(CATALOGUE)),
    data=st.data(),
    replacement=JSON_VALUES | SMALL_INTS | st.just(0) | st.just(-1) | st.just(float("nan")),
    delete=st.booleans(),
)
def test_damaged_catalogue_configs_raise_only_the_domain_error(
    name: str, data: st.DataObject, replacement: Any, delete: bool
) -> None:
    config = copy.deepcopy(CATALOGUE[name])
    target = config.get("text_config", config) if data.draw(st.booleans()) else config
    if not isinstance(target, dict) or not target:
        target = config
    key = data.draw(st.sampled_from(sorted(target)))
    if delete:
        del target[key]
    else:
        target[key] = replacement
    _parse_or_reject(config)


# -- scaling -------------------------------------------------------------------------------


@st.composite
def dense_configs(draw: st.DrawFn) -> dict[str, Any]:
    kv_heads = draw(st.integers(1, 8))
    heads = kv_heads * draw(st.integers(1, 8))
    head_dim = draw(st.sampled_from([16, 32, 64, 128]))
    return {
        "model_type": "llama",
        "num_hidden_layers": draw(st.integers(1, 48)),
        "hidden_size": draw(st.integers(1, 64)) * 64,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": draw(st.integers(1, 20_000)),
        "vocab_size": draw(st.integers(1, 300_000)),
        "tie_word_embeddings": draw(st.booleans()),
        "torch_dtype": "bfloat16",
    }


def _total(config: dict[str, Any]) -> int:
    return count_parameters(parse_architecture(config, name="p")).total


@settings(max_examples=60, deadline=None)
@given(dense_configs())
def test_parameters_are_linear_in_layers(config: dict[str, Any]) -> None:
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    head = 0 if config["tie_word_embeddings"] else 1
    fixed = config["vocab_size"] * h * (1 + head) + h  # embeddings and final norm
    one = _total({**config, "num_hidden_layers": 1}) - fixed
    assert _total(config) - fixed == layers * one
    assert _total({**config, "num_hidden_layers": 2 * layers}) - fixed == 2 * layers * one


@settings(max_examples=60, deadline=None)
@given(dense_configs())
def test_parameters_grow_with_widths(config: dict[str, Any]) -> None:
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    wider = {**config, "intermediate_size": config["intermediate_size"] + 1}
    assert _total(wider) - _total(config) == layers * 3 * h  # gate, up and down
    vocab = {**config, "vocab_size": config["vocab_size"] + 1}
    assert _total(vocab) - _total(config) == h * (1 if config["tie_word_embeddings"] else 2)
    kv = {
        **config,
        "num_key_value_heads": config["num_key_value_heads"] * 2,
        "num_attention_heads": config["num_attention_heads"] * 2,
    }
    # doubling both head counts adds q, k, v and o columns: 2*h*H*D + 2*h*H_kv*D per layer
    extra = (
        2 * h * config["head_dim"] * (config["num_attention_heads"] + config["num_key_value_heads"])
    )
    assert _total(kv) - _total(config) == layers * extra


@settings(max_examples=60, deadline=None)
@given(dense_configs())
def test_kv_bytes_scale_with_layers_and_kv_heads(config: dict[str, Any]) -> None:
    arch = parse_architecture(config, name="p")
    per_layer = 2 * config["num_key_value_heads"] * config["head_dim"] * 2
    assert kv_footprint(arch, "bf16").bytes_per_token == config["num_hidden_layers"] * per_layer
    assert (
        kv_footprint(arch, "fp32").bytes_per_token == 2 * kv_footprint(arch, "bf16").bytes_per_token
    )


@settings(max_examples=60, deadline=None)
@given(
    config=dense_configs(),
    experts=st.integers(1, 64),
    top_k=st.integers(1, 8),
)
def test_experts_add_total_not_active_parameters(
    config: dict[str, Any], experts: int, top_k: int
) -> None:
    moe = {
        **config,
        "model_type": "mixtral",
        "num_local_experts": experts + top_k,
        "num_experts_per_tok": top_k,
    }
    h, width, layers = (
        config["hidden_size"],
        config["intermediate_size"],
        config["num_hidden_layers"],
    )
    base = count_parameters(parse_architecture(moe, name="m"))
    more = count_parameters(
        parse_architecture({**moe, "num_local_experts": experts + top_k + 1}, name="m")
    )
    # one more expert per layer: its three projections and one more router row
    assert more.total - base.total == layers * (3 * h * width + h)
    assert more.active - base.active == layers * h  # only the router grows for the token
    deeper = count_parameters(
        parse_architecture({**moe, "num_experts_per_tok": top_k + 1}, name="m")
    )
    assert deeper.total == base.total
    assert deeper.active - base.active == layers * 3 * h * width
