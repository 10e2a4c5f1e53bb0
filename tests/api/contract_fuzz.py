"""Schemathesis against the app, in process: every operation stateless (positive and negative
cases, keys of every scope in turn) and a stateful run along the OpenAPI links.

Used by ``tests/api/test_schemathesis.py`` (a bounded run in ``make test``) and by
``python -m tests.api.contract_fuzz`` (``make fuzz``: the exploratory run with larger budgets).
Failures are collected, not raised, so one bad operation does not hide the others and
Hypothesis does not spend the budget shrinking.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import delete

from servesize.api.app import create_app
from servesize.db import migrate
from servesize.db.connection import create_db_engine, make_sessionmaker, transaction
from servesize.db.models import ApiKey, CustomModel, HardwareMeasurement, HardwareProfile
from servesize.db.repository import ApiKeyRepository
from servesize.security import Scope
from servesize.settings import Settings

CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]
KEY_SCOPES: tuple[tuple[Scope, ...], ...] = (
    (),
    (Scope.MODELS_WRITE,),
    (Scope.PROFILES_WRITE,),
    (Scope.ADMIN,),
)
"""Keys the cases take in turn: none, then one key of each scope."""

HEAVY = frozenset(
    {"simulateServing", "createSizing", "findSloCapacity", "evaluateSlo", "estimatePerformance"}
)
"""Operations that run the planner: each valid case costs up to seconds, so fewer cases."""


@dataclass
class Budget:
    cases_per_operation: int = 24
    heavy_cases_per_operation: int = 6
    stateful_scenarios: int = 30
    stateful_steps: int = 8


@dataclass
class Summary:
    database: str
    cases: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    stateful_steps: int = 0
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.cases.values()) + self.stateful_steps

    def render(self) -> str:
        statuses = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        lines = [
            f"schemathesis on {self.database}: {self.total} cases "
            f"({sum(self.cases.values())} stateless over {len(self.cases)} operations, "
            f"{self.stateful_steps} stateful steps), {len(self.failures)} failures, "
            f"{self.seconds:.1f} s",
            f"  statuses: {statuses}",
            f"  checks: {', '.join(c.__name__ for c in CHECKS)}",
        ]
        lines += [f"  FAILURE {f}" for f in self.failures[:50]]
        return "\n".join(lines)


def make_keys(database_url: str) -> list[str | None]:
    """One key per entry of :data:`KEY_SCOPES` (``None`` for no key)."""
    db_engine = create_db_engine(database_url)
    tokens: list[str | None] = []
    try:
        with transaction(make_sessionmaker(db_engine)) as session:
            repo = ApiKeyRepository(session)
            for i, scopes in enumerate(KEY_SCOPES):
                if not scopes:
                    tokens.append(None)
                    continue
                _, new = repo.create(name=f"fuzz-{i}-{'-'.join(scopes)}", scopes=scopes)
                tokens.append(new.token)
    finally:
        db_engine.dispose()
    return tokens


def _authorise(case: Case[Any], token: str | None) -> None:
    headers = case.headers
    for name in [n for n in headers if n.lower() == "authorization"]:
        del headers[name]
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"


def _failure(case: Case[Any], exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return f"{case.operation.label}: {type(exc).__name__}: {' | '.join(first[:6])}"


def _exercise(
    operation: Any,
    examples: int,
    summary: Summary,
    next_token: Callable[[], str | None],
) -> None:
    """``examples`` positive and negative cases of one operation, each checked."""
    op_id = operation.definition.raw.get("operationId", operation.label)
    strategy = st.one_of(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
    )

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def one(case: Case[Any]) -> None:
        _authorise(case, next_token())
        summary.cases[op_id] += 1
        try:
            response = case.call()
            summary.statuses[response.status_code] += 1
            case.validate_response(response, checks=CHECKS)
        except (Exception, BaseExceptionGroup) as exc:  # every failure is reported
            summary.failures.append(_failure(case, exc))

    one()


def run_stateless(
    schema: Any, tokens: Sequence[str | None], budget: Budget, summary: Summary
) -> None:
    """Every operation; the cases take the keys of :data:`KEY_SCOPES` in turn."""
    turns = itertools.cycle(tokens)
    for result in schema.get_all_operations():
        operation = result.ok()
        op_id = operation.definition.raw.get("operationId")
        n = budget.heavy_cases_per_operation if op_id in HEAVY else budget.cases_per_operation
        _exercise(operation, n, summary, lambda: next(turns))


def reset(database_url: str) -> None:
    """Remove what a scenario created, so every scenario starts from the same database (the
    state machine's draws depend on the responses: a second 201 for the same id is a 409)."""
    db_engine = create_db_engine(database_url)
    try:
        with db_engine.begin() as conn:
            conn.execute(delete(HardwareMeasurement))
            conn.execute(delete(CustomModel))
            conn.execute(delete(HardwareProfile).where(HardwareProfile.kind == "custom"))
            conn.execute(delete(ApiKey).where(ApiKey.name.not_like("fuzz-%")))
    finally:
        db_engine.dispose()


def run_stateful(
    schema: Any, database_url: str, token: str | None, budget: Budget, summary: Summary
) -> None:
    base = schema.as_state_machine()

    class Machine(base):  # type: ignore[misc, valid-type]
        def before_call(self, case: Case[Any]) -> None:
            _authorise(case, token)

        def teardown(self) -> None:
            super().teardown()
            reset(database_url)

        def validate_response(self, response: Any, case: Case[Any], **kwargs: Any) -> None:
            summary.stateful_steps += 1
            summary.statuses[response.status_code] += 1
            try:
                case.validate_response(response, checks=CHECKS)
            except (Exception, BaseExceptionGroup) as exc:
                summary.failures.append("stateful " + _failure(case, exc))

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=budget.stateful_scenarios,
            stateful_step_count=budget.stateful_steps,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        ),
    )


def build(database_url: str) -> tuple[FastAPI, list[str | None]]:
    tokens = make_keys(database_url)
    app = create_app(Settings(database_url=database_url, rate_limit_per_minute=0))
    return app, tokens


def run(database: str, database_url: str, budget: Budget) -> Summary:
    """Stateless over every operation, then stateful; keys are created in ``database_url``."""
    summary = Summary(database=database)
    started = time.perf_counter()
    app, tokens = build(database_url)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    run_stateless(schema, tokens, budget, summary)
    run_stateful(schema, database_url, tokens[-1], budget, summary)
    summary.seconds = time.perf_counter() - started
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """``make fuzz``: the exploratory run on SQLite (and PostgreSQL with ``--postgres``)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=300, help="cases per operation")
    parser.add_argument("--heavy-cases", type=int, default=40)
    parser.add_argument("--scenarios", type=int, default=300)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args(argv)
    budget = Budget(args.cases, args.heavy_cases, args.scenarios, 12)
    failed = False
    directory = Path(tempfile.mkdtemp())
    try:
        url = f"sqlite:///{directory / 'fuzz.db'}"
        migrate.upgrade(url)
        summary = run("sqlite", url, budget)
        sys.stdout.write(summary.render() + "\n")
        failed |= bool(summary.failures)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.postgres:
        from tests.backends import PostgresSchema

        pg = PostgresSchema.create()
        try:
            migrate.upgrade(pg.url)
            summary = run("postgresql", pg.url, budget)
            sys.stdout.write(summary.render() + "\n")
            failed |= bool(summary.failures)
        finally:
            pg.drop()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
