"""The model catalogue: upstream ``config.json`` files stored verbatim under ``models/``.

A file ``{org}--{name}.json`` holds the config of the Hugging Face model ``{org}/{name}``. This
module does the file IO; the architecture maths lives in :mod:`servesize.core.architecture`,
which takes the decoded dict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from servesize.core.architecture import Architecture, parse_architecture
from servesize.core.errors import PlanningError

__all__ = [
    "CatalogFileError",
    "ModelCatalog",
    "UnknownModelError",
    "filename_for",
    "model_id_from_filename",
]

_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_FILENAME = re.compile(rf"^(?P<org>{_PART})--(?P<name>{_PART})\.json$")
_MODEL_ID = re.compile(rf"^(?P<org>{_PART})/(?P<name>{_PART})$")


class UnknownModelError(PlanningError, KeyError):
    """No catalogue entry has this model id."""

    def __init__(self, model_id: str) -> None:
        super().__init__(f"model {model_id!r} is not in the catalogue")
        self.model_id = model_id

    def __str__(self) -> str:  # KeyError would otherwise repr() its argument
        return str(self.args[0])


class CatalogFileError(ValueError):
    """A catalogue file is misnamed or does not hold a JSON object."""


def model_id_from_filename(filename: str) -> str:
    """``"meta-llama--Llama-3.1-8B.json"`` -> ``"meta-llama/Llama-3.1-8B"``.

    >>> model_id_from_filename("meta-llama--Llama-3.1-8B.json")
    'meta-llama/Llama-3.1-8B'
    """
    match = _FILENAME.match(filename)
    if match is None or filename.count("--") != 1:
        raise CatalogFileError(f"{filename!r} is not named {{org}}--{{name}}.json")
    return f"{match['org']}/{match['name']}"


def filename_for(model_id: str) -> str:
    """``"Qwen/Qwen3-8B"`` -> ``"Qwen--Qwen3-8B.json"``; raises ``UnknownModelError`` if malformed.

    >>> filename_for("Qwen/Qwen3-8B")
    'Qwen--Qwen3-8B.json'
    """
    match = _MODEL_ID.match(model_id)
    if match is None or "--" in model_id:
        raise UnknownModelError(model_id)
    return f"{match['org']}--{match['name']}.json"


class ModelCatalog:
    """Read-only view of a directory of ``{org}--{name}.json`` configs.

    The directory is listed once, at construction; configs are read on demand and returned as
    fresh dicts, exactly as stored.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        paths: dict[str, Path] = {}
        for path in sorted(directory.glob("*.json")):
            paths[model_id_from_filename(path.name)] = path
        self._paths = paths

    def ids(self) -> tuple[str, ...]:
        """All model ids, sorted."""
        return tuple(self._paths)

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def path(self, model_id: str) -> Path:
        try:
            return self._paths[model_id]
        except KeyError:
            raise UnknownModelError(model_id) from None

    def config(self, model_id: str) -> dict[str, Any]:
        """The stored ``config.json`` of ``model_id``, verbatim."""
        path = self.path(model_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CatalogFileError(f"{path.name}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise CatalogFileError(f"{path.name}: the top level must be a JSON object")
        return data

    def architecture(self, model_id: str) -> Architecture:
        """The parsed architecture of ``model_id``."""
        return parse_architecture(self.config(model_id), name=model_id)
