"""Schemathesis in CI: a bounded, reproducible run on each database (fixed seed, a case
budget), stateless over every operation with keys of every scope plus a stateful run along
the OpenAPI links, under the checks not_a_server_error, response_schema_conformance,
status_code_conformance and content_type_conformance. ``make fuzz`` runs the same harness
with larger budgets."""

from __future__ import annotations

import sys

import pytest

from tests.api.contract_fuzz import Budget, run
from tests.api.openapi_document import openapi_document

CI_BUDGET = Budget(
    cases_per_operation=20, heavy_cases_per_operation=5, stateful_scenarios=20, stateful_steps=8
)
"""575 cases a database (1,150 over both), about 27 s each on two shared cores."""


def test_schemathesis_finds_no_failure(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    database = "postgresql" if database_url.startswith("postgresql") else "sqlite"
    operations = sum(
        1
        for item in openapi_document()["paths"].values()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    )
    summary = run(database, database_url, CI_BUDGET)
    with capsys.disabled():
        sys.stdout.write("\n" + summary.render() + "\n")
    assert summary.failures == []
    assert len(summary.cases) == operations  # every operation was exercised
    assert summary.total >= 500
    assert summary.stateful_steps >= 60
    # Writes with the right key got through: the run reached past authentication.
    assert summary.statuses[201] > 0
    assert summary.statuses[403] > 0
