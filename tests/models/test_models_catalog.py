"""The ``models/`` catalogue: names, uniqueness, verbatim content, and every file plans."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from servesize.catalog import (
    CatalogFileError,
    ModelCatalog,
    UnknownModelError,
    filename_for,
    model_id_from_filename,
)
from servesize.core.architecture import parse_architecture, summarize
from servesize.core.errors import PlanningError

MODELS = Path(__file__).resolve().parents[2] / "servesize" / "data" / "models"
REFERENCE = Path(__file__).resolve().parent / "reference"
"""Reference model records (copied from the shared reference set; see its README)."""
FILES = sorted(MODELS.glob("*.json"))
CATALOG = ModelCatalog(MODELS)


def test_catalogue_size_and_unique_ids() -> None:
    ids = CATALOG.ids()
    assert len(ids) >= 25
    assert len({i.lower() for i in ids}) == len(ids)  # unique even on case-insensitive disks
    assert len(ids) == len(FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_file_is_named_org_double_dash_name(path: Path) -> None:
    assert re.fullmatch(r"[A-Za-z0-9][\w.-]*--[A-Za-z0-9][\w.-]*\.json", path.name)
    assert path.name.count("--") == 1
    model_id = model_id_from_filename(path.name)
    assert filename_for(model_id) == path.name


@pytest.mark.parametrize("model_id", CATALOG.ids())
def test_every_entry_loads_and_plans(model_id: str) -> None:
    config = CATALOG.config(model_id)
    assert config == json.loads(CATALOG.path(model_id).read_text())
    arch = parse_architecture(config, name=model_id)
    summary = summarize(arch)
    assert summary.parameters_total > summary.parameters_embedding > 0
    assert sum(summary.layer_kinds.values()) == summary.num_layers == len(arch.layers)
    # A pure state-space model caches nothing per token, only a state per sequence.
    assert summary.kv_bytes_per_token["bf16"] > 0 or summary.state_bytes_per_sequence["bf16"] > 0


def test_families_cover_the_issue() -> None:
    families = {CATALOG.architecture(i).family for i in CATALOG.ids()}
    assert {
        "llama",
        "mistral",
        "mixtral",
        "phi3",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "qwen3_next",
        "qwen3_5",
        "gemma2",
        "gemma3",
        "deepseek_v3",
        "gpt_oss",
        "llama4",
        "falcon",
        "jamba",
        "bamba",
        "nemotron_h",
        "mamba2",
    } <= families
    kinds = {kind for i in CATALOG.ids() for kind in summarize(CATALOG.architecture(i)).layer_kinds}
    assert kinds == {
        "full_attention",
        "sliding_attention",
        "chunked_attention",
        "mla",
        "linear_attention",
        "mamba",
    }


def test_reference_configs_are_stored_verbatim() -> None:
    paths = sorted(REFERENCE.glob("*.json"))
    assert len(paths) == 16  # the whole reference set, so a lost file fails here
    for path in paths:
        reference = json.loads(path.read_text())
        assert CATALOG.config(reference["hf_repo"]) == reference["config"], path.name


def test_config_is_a_fresh_copy() -> None:
    first = CATALOG.config("meta-llama/Llama-3.1-8B")
    first["hidden_size"] = 1
    assert CATALOG.config("meta-llama/Llama-3.1-8B")["hidden_size"] == 4096


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-9", "nope", "a/b/c", "x--y/z", ""])
def test_unknown_id_is_a_domain_key_error(model_id: str) -> None:
    with pytest.raises(UnknownModelError) as caught:
        CATALOG.config(model_id)
    assert isinstance(caught.value, KeyError)
    assert isinstance(caught.value, PlanningError)
    assert "is not in the catalogue" in str(caught.value)
    assert model_id not in CATALOG


def test_misnamed_and_malformed_files_are_rejected(tmp_path: Path) -> None:
    (tmp_path / "llama.json").write_text("{}")
    with pytest.raises(CatalogFileError, match="org"):
        ModelCatalog(tmp_path)
    (tmp_path / "llama.json").unlink()
    (tmp_path / "a--b.json").write_text("[1, 2]")
    (tmp_path / "a--c.json").write_text("{not json")
    catalog = ModelCatalog(tmp_path)
    assert list(catalog) == ["a/b", "a/c"]
    assert len(catalog) == 2
    with pytest.raises(CatalogFileError, match="JSON object"):
        catalog.config("a/b")
    with pytest.raises(CatalogFileError, match="not valid JSON"):
        catalog.config("a/c")
