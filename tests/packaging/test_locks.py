"""The lock files in requirements/ agree with pyproject.toml and with each other: a requirement
added or raised without ``make lock`` fails here rather than at install time on another machine."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
PIN = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;]+)\s*(?:;(?P<marker>[^\\]+))?\\?$")


def _pins(lock: str) -> dict[NormalizedName, str]:
    """The versions a lock file installs on this interpreter and platform; every pin is hashed."""
    text = (REPO / "requirements" / lock).read_text()
    pins: dict[NormalizedName, str] = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.splitlines()[0]
        if first.startswith("#"):
            continue
        match = PIN.match(first)
        assert match, f"{lock}: not a pin: {first!r}"
        assert "--hash=sha256:" in block, f"{lock}: {first!r} has no hash"
        marker = match["marker"]
        if marker is None or Marker(marker).evaluate():
            pins[canonicalize_name(match["name"])] = match["version"]
    return pins


def _requirements(*extras: str) -> list[Requirement]:
    lines = list(PROJECT["dependencies"])
    for extra in extras:
        lines += PROJECT["optional-dependencies"][extra]
    parsed = [Requirement(line) for line in lines]
    return [r for r in parsed if canonicalize_name(r.name) != "servesize"]


@pytest.mark.parametrize(
    ("lock", "extras"),
    [
        ("lock.txt", ("dev", "server", "postgres", "hub", "agent")),
        ("server.txt", ("server", "postgres")),
        ("agent.txt", ("agent",)),
    ],
)
def test_a_lock_satisfies_the_requirements_it_was_made_for(
    lock: str, extras: tuple[str, ...]
) -> None:
    pins = _pins(lock)
    for requirement in _requirements(*extras):
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{lock} has no pin for {requirement}: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{lock} pins {name}=={pins[name]}, pyproject.toml asks {requirement}: run `make lock`"
        )


@pytest.mark.parametrize("lock", ["server.txt", "agent.txt"])
def test_the_partial_locks_pin_what_the_full_lock_pins(lock: str) -> None:
    full = _pins("lock.txt")
    partial = _pins(lock)
    assert {name: full.get(name) for name in partial} == partial


def test_the_dev_extra_names_every_other_extra_but_cuda() -> None:
    """``lock.txt`` is made from the dev extra, so it holds what CI and ``make`` need."""
    (self_reference,) = (
        Requirement(line)
        for line in PROJECT["optional-dependencies"]["dev"]
        if canonicalize_name(Requirement(line).name) == "servesize"
    )
    others = set(PROJECT["optional-dependencies"]) - {"dev", "cuda"}
    assert self_reference.extras == others


def test_the_build_lock_satisfies_the_build_backend() -> None:
    pins = _pins("build.txt")
    build_system = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]
    for requirement in map(Requirement, build_system["requires"]):
        name = canonicalize_name(requirement.name)
        assert name in pins
        assert requirement.specifier.contains(pins[name])
