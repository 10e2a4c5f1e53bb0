"""Slow tests are deselected unless asked for, and never run once per database."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.conftest import pytest_collection_modifyitems, runs_slow_tests


@dataclass
class _Item:
    nodeid: str
    slow: bool = False
    fixturenames: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return pytest.mark.slow.mark if name == "slow" and self.slow else None


@dataclass
class _Hook:
    deselected: list[Any] = field(default_factory=list)

    def pytest_deselected(self, items: list[Any]) -> None:
        self.deselected += items


@dataclass
class _Config:
    slow_option: bool = False
    markexpr: str = ""
    hook: _Hook = field(default_factory=_Hook)

    def getoption(self, name: str, default: object = None) -> object:
        return {"--slow": self.slow_option, "markexpr": self.markexpr}.get(name, default)


def _select(config: _Config, items: list[_Item]) -> list[str]:
    kept = cast(list[pytest.Item], list(items))
    pytest_collection_modifyitems(cast(pytest.Config, config), kept)
    return [item.nodeid for item in kept]


ITEMS = [_Item("fast"), _Item("replay", slow=True), _Item("api[sqlite]", fixturenames=("client",))]


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SLOW", raising=False)


@pytest.mark.usefixtures("local")
def test_a_local_run_deselects_slow_tests_and_reports_them() -> None:
    config = _Config()
    assert _select(config, ITEMS) == ["fast", "api[sqlite]"]
    assert [item.nodeid for item in config.hook.deselected] == ["replay"]


@pytest.mark.usefixtures("local")
@pytest.mark.parametrize(
    ("env", "config"),
    [
        ({"CI": "true"}, _Config()),
        ({"SLOW": "1"}, _Config()),
        ({}, _Config(slow_option=True)),
        ({}, _Config(markexpr="slow")),
    ],
    ids=["CI=true", "SLOW=1", "--slow", "-m slow"],
)
def test_ci_and_each_opt_in_keep_slow_tests(
    env: dict[str, str], config: _Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert runs_slow_tests(cast(pytest.Config, config))
    assert _select(config, ITEMS) == ["fast", "replay", "api[sqlite]"]
    assert config.hook.deselected == []


@pytest.mark.usefixtures("local")
def test_a_slow_test_on_the_database_parametrisation_is_refused() -> None:
    items = [*ITEMS, _Item("replay_api[sqlite]", slow=True, fixturenames=("database_url",))]
    with pytest.raises(pytest.UsageError, match=r"replay_api\[sqlite\]"):
        _select(_Config(slow_option=True), items)
