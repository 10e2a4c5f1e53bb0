"""A missing browser or node skips a browser test on a developer's machine and fails it in CI."""

from __future__ import annotations

import pytest

from tests.browser.conftest import require

MISSING = "/nonexistent/servesize-no-such-browser"


def test_a_missing_program_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        require(MISSING, "testing")


def test_a_missing_program_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="make browser-deps"):
        require(MISSING, "testing")


def test_a_present_program_is_found() -> None:
    assert require("sh", "testing").endswith("/sh")
