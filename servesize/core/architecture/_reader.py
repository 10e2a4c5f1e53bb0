"""Typed, issue-collecting access to the fields of a ``config.json`` document.

Every accessor returns a usable value even when the field is bad (a neutral placeholder), and
records a :class:`~servesize.core.errors.FieldIssue` instead of raising. The parser reads every
field it needs, then calls :meth:`Issues.raise_if_any`, so one response lists *all* problems.
Fields are addressed by JSON pointers (RFC 6901) into the original document.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from servesize.core.errors import FieldIssue, InvalidArchitectureError

_MISSING: Final = object()


def json_pointer(*parts: str | int) -> str:
    """Join path parts into a JSON pointer, escaping ``~`` and ``/`` as RFC 6901 requires.

    >>> json_pointer("text_config", "head_dim")
    '/text_config/head_dim'
    """
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence):
        return "an array"
    return type(value).__name__


@dataclass(slots=True)
class Issues:
    """Problems and assumptions collected while reading one config."""

    model: str
    problems: list[FieldIssue] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)

    def add(self, pointer: str, problem: str) -> None:
        if not any(i.field == pointer and i.problem == problem for i in self.problems):
            self.problems.append(FieldIssue(field=pointer or "/", problem=problem))

    def assume(self, text: str) -> None:
        if text not in self.assumptions:
            self.assumptions.append(text)

    def raise_if_any(self) -> None:
        if self.problems:
            raise InvalidArchitectureError(self.model, list(self.problems))


@dataclass(slots=True)
class ConfigReader:
    """Reads fields from ``section`` (a sub-document at ``prefix``) with typed validation.

    ``fallback`` is an enclosing document consulted when a key is absent from ``section``
    (multimodal wrappers keep some fields, e.g. ``tie_word_embeddings``, at the top level).
    """

    section: Mapping[str, Any]
    issues: Issues
    prefix: tuple[str, ...] = ()
    fallback: Mapping[str, Any] | None = None
    bad: set[str] = field(default_factory=set)

    def pointer(self, key: str) -> str:
        return json_pointer(*self.prefix, key)

    def has(self, key: str) -> bool:
        return self.raw(key) is not _MISSING

    def raw(self, key: str) -> Any:
        if key in self.section:
            return self.section[key]
        if self.fallback is not None and key in self.fallback:
            return self.fallback[key]
        return _MISSING

    def where(self, key: str) -> str:
        """Pointer to where ``key`` was found (the section, else the fallback)."""
        if key not in self.section and self.fallback is not None and key in self.fallback:
            return json_pointer(key)
        return self.pointer(key)

    def ok(self, *keys: str) -> bool:
        """True when none of ``keys`` has been reported as invalid."""
        return not any(k in self.bad for k in keys)

    def _problem(self, key: str, text: str) -> None:
        self.bad.add(key)
        self.issues.add(self.where(key), text)

    # -- scalars --------------------------------------------------------------------------

    def integer(
        self,
        key: str,
        *,
        minimum: int = 1,
        default: int | None = None,
        assumption: str | None = None,
        nullable: bool = False,
    ) -> int:
        """An integer ``>= minimum``. Missing: ``default`` (recording ``assumption``) or an issue.

        ``nullable`` treats JSON ``null`` like a missing key. Returns ``max(minimum, 1)`` as a
        placeholder when the field is bad, so arithmetic on it cannot fail before the parser
        raises.
        """
        placeholder = max(minimum, 1)
        value = self.raw(key)
        if value is _MISSING or (nullable and value is None):
            if default is not None:
                if assumption:
                    self.issues.assume(assumption)
                return default
            self._problem(key, "required field is missing")
            return placeholder
        if isinstance(value, bool) or not isinstance(value, int):
            self._problem(key, f"must be an integer, got {_type_name(value)}")
            return placeholder
        if value < minimum:
            bound = "positive" if minimum == 1 else f">= {minimum}"
            self._problem(key, f"must be {bound}, got {value}")
            return placeholder
        return value

    def optional_integer(self, key: str, *, minimum: int = 1) -> int | None:
        """An integer ``>= minimum``, or None when the key is missing or ``null``."""
        value = self.raw(key)
        if value is _MISSING or value is None:
            return None
        return self.integer(key, minimum=minimum)

    def boolean(self, key: str, *, default: bool, assumption: str | None = None) -> bool:
        value = self.raw(key)
        if value is _MISSING or value is None:
            if assumption:
                self.issues.assume(assumption)
            return default
        if not isinstance(value, bool):
            self._problem(key, f"must be a boolean, got {_type_name(value)}")
            return default
        return value

    def string(self, key: str, *, default: str | None = None) -> str | None:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, str):
            self._problem(key, f"must be a string, got {_type_name(value)}")
            return default
        return value

    def number(self, key: str) -> float | None:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            self._problem(key, f"must be a finite number, got {_type_name(value)}")
            return None
        return float(value)

    # -- containers -----------------------------------------------------------------------

    def string_list(self, key: str) -> tuple[str, ...] | None:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return None
        if isinstance(value, str) or not isinstance(value, Sequence):
            self._problem(key, f"must be an array of strings, got {_type_name(value)}")
            return None
        if not all(isinstance(v, str) for v in value):
            self._problem(key, "must be an array of strings")
            return None
        return tuple(value)

    def integer_list(self, key: str, *, minimum: int = 0) -> tuple[int, ...] | None:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return None
        if isinstance(value, str) or not isinstance(value, Sequence):
            self._problem(key, f"must be an array of integers, got {_type_name(value)}")
            return None
        out: list[int] = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or item < minimum:
                self._problem(key, f"must be an array of integers >= {minimum}")
                return None
            out.append(item)
        return tuple(out)

    def mapping(self, key: str) -> Mapping[str, Any] | None:
        value = self.raw(key)
        if value is _MISSING or value is None:
            return None
        if not isinstance(value, Mapping):
            self._problem(key, f"must be an object, got {_type_name(value)}")
            return None
        return value

    def child(self, key: str, section: Mapping[str, Any]) -> ConfigReader:
        """A reader for the sub-document ``section`` found at ``key``."""
        prefix = (*self.prefix, key) if key in self.section else (key,)
        return ConfigReader(section=section, issues=self.issues, prefix=prefix)
