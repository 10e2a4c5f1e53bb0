"""The fault and load benches as tests (marked slow: they start servers and a PostgreSQL
cluster; they run with ``CI=true``). Each checks outcomes, never timings."""

from __future__ import annotations

import asyncio
import tempfile

import pytest

from bench import faults, load
from bench.servers import start_servesize
from tests.backends import ci_requires_postgres


@pytest.mark.slow
def test_no_acknowledged_upload_is_lost_over_two_postgres_restarts() -> None:
    if faults.pg_bin() is None:
        if ci_requires_postgres():
            pytest.fail("CI=true requires the PostgreSQL server binaries (PG_BIN)")
        pytest.skip("no PostgreSQL server binaries")
    report = faults.postgres_restarts(restarts=2, outage_s=1.0, uploaders=2, between_s=1.0)
    assert report.uploads.acknowledged, report.uploads.statuses
    assert report.lost == []
    assert report.uploads.not_problem == []  # every failure was a problem+json document
    assert set(report.uploads.statuses) <= {"201", "503"}, report.uploads.statuses
    assert report.readyz_down == [503, 503]
    assert report.readyz_up == [200, 200]
    assert report.same_process


@pytest.mark.slow
def test_kill_9_during_uploads_leaves_no_half_written_measurement() -> None:
    report = faults.kill_during_uploads(uploaders=2, kill_after_s=2.0)
    assert report.uploads.acknowledged
    assert report.lost == []
    assert report.integrity == "ok"
    assert report.broken == []
    assert report.stored >= len(report.uploads.acknowledged)
    assert (report.ready_after, report.upload_after) == (200, 201)


@pytest.mark.slow
def test_the_load_bench_runs_without_errors_against_servesize_serve() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/servesize.db"
        server = start_servesize(url, env={"RATE_LIMIT_PER_MINUTE": "0"})
        try:
            server.wait_ready("/readyz")
            for spec in load.PHASES[1:]:
                phase = load.Phase(*spec)
                asyncio.run(load.run_phase(server.base_url, phase, clients=10, duration_s=1.0))
                assert phase.ok > 0, phase.name
                assert phase.errors == {}, (phase.name, phase.errors)
        finally:
            server.stop()
