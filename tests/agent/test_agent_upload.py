"""Uploads against a fake servesize server on loopback: retries, idempotency, refusals."""

from __future__ import annotations

import socket
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servesize.agent.cli import app
from servesize.agent.upload import (
    RetryPolicy,
    SavedMeasurement,
    UploadError,
    measurements_url,
    retry_after_s,
    upload,
)
from servesize.schemas.measurements import BandwidthResult, MeasurementUpload, Provenance
from tests.agent.agent_fakes import Answer, MeasurementState, measurement_server, problem

TOKEN = "ssk_0123456789abcdef_secret"


def _payload() -> MeasurementUpload:
    return MeasurementUpload(
        provenance=Provenance(
            agent_version="0.1.0",
            method_version=1,
            host="gpu-host",
            device="cuda:0",
            gpu_name="NVIDIA H100 80GB HBM3",
            measured_at=datetime(2026, 1, 15, 12, 0, tzinfo=UTC),
        ),
        memory_bandwidth=[
            BandwidthResult(
                kind="copy",
                bytes_moved=2 << 30,
                latency_s=1e-3,
                achieved_bytes_per_s=2.147483648e12,
            )
        ],
    )


def _saved(profile: str | None = "h100-sxm") -> SavedMeasurement:
    return SavedMeasurement.new(_payload(), profile=profile)


class Sleeps:
    """Records requested delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays_s: list[float] = []

    def __call__(self, delay_s: float) -> None:
        self.delays_s.append(delay_s)


def test_503_then_201_is_one_success_with_one_idempotency_key() -> None:
    state = MeasurementState(script=[problem(503, "database restarting")])
    saved, sleeps = _saved(), Sleeps()
    with measurement_server(state) as url:
        result = upload(saved, url=url, token=TOKEN, sleep=sleeps)

    assert (result.status_code, result.measurement_id, result.attempts) == (201, "m-2", 2)
    assert not result.replayed
    assert len(state.requests) == 2
    keys = {headers["Idempotency-Key"] for _, headers, _ in state.requests}
    assert keys == {saved.idempotency_key}
    assert uuid.UUID(saved.idempotency_key).version == 4
    for path, headers, body in state.requests:
        assert path == "/v1/hardware/h100-sxm/measurements"
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        assert body == saved.payload.model_dump(mode="json")
    # no Retry-After: exponential backoff, first delay base·2^0 times a factor in [0.5, 1]
    (delay_s,) = sleeps.delays_s
    assert 0.5 <= delay_s <= 1.0


def test_retry_after_is_honoured_on_429() -> None:
    state = MeasurementState(
        script=[Answer(429, {"detail": "slow down"}, headers={"Retry-After": "3"})]
    )
    sleeps = Sleeps()
    with measurement_server(state) as url:
        result = upload(_saved(), url=url, token=TOKEN, sleep=sleeps)
    assert result.attempts == 2
    assert sleeps.delays_s == [3.0]


@pytest.mark.parametrize(
    "answer",
    [
        Answer(200, {"id": "m-original"}),
        Answer(201, {"id": "m-original"}, headers={"Idempotent-Replayed": "true"}),
    ],
    ids=["200", "201-replayed-header"],
)
def test_replay_answer_is_reported_as_replayed(answer: Answer) -> None:
    state = MeasurementState(script=[answer])
    with measurement_server(state) as url:
        result = upload(_saved(), url=url, token=TOKEN)
    assert result.replayed
    assert result.measurement_id == "m-original"


def test_422_is_not_retried() -> None:
    errors = [{"location": "body", "pointer": "/gemm/0/achieved_tflop_per_s", "detail": "too fast"}]
    state = MeasurementState(script=[problem(422, "achieved exceeds 1.15 × datasheet", errors)])
    sleeps = Sleeps()
    with measurement_server(state) as url, pytest.raises(UploadError) as caught:
        upload(_saved(), url=url, token=TOKEN, sleep=sleeps)
    assert caught.value.status_code == 422
    assert caught.value.detail == "achieved exceeds 1.15 × datasheet"
    assert caught.value.errors == ["/gemm/0/achieved_tflop_per_s: too fast"]
    assert len(state.requests) == 1
    assert sleeps.delays_s == []


def test_retries_are_bounded_in_attempts() -> None:
    state = MeasurementState(script=[problem(500, "boom")] * 5)
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.01)
    with measurement_server(state) as url, pytest.raises(UploadError, match="gave up after 3"):
        upload(_saved(), url=url, token=TOKEN, policy=policy, sleep=sleeps)
    assert len(state.requests) == 3
    assert len(sleeps.delays_s) == 2
    # backoff doubles: ≤ 0.01 then ≤ 0.02
    assert sleeps.delays_s[0] <= 0.01 < sleeps.delays_s[1] * 2 <= 0.04


def test_retries_are_bounded_in_total_time() -> None:
    state = MeasurementState(
        script=[Answer(503, {"detail": "busy"}, headers={"Retry-After": "600"})]
    )
    with measurement_server(state) as url, pytest.raises(UploadError, match="gave up after 1"):
        upload(_saved(), url=url, token=TOKEN, policy=RetryPolicy(max_total_s=60), sleep=Sleeps())


def test_connection_errors_are_retried() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.01, request_timeout_s=2)
    with pytest.raises(UploadError, match="ConnectError"):
        upload(_saved(), url=f"http://127.0.0.1:{port}", token=TOKEN, policy=policy, sleep=sleeps)
    assert len(sleeps.delays_s) == 2


def test_upload_needs_a_profile() -> None:
    with pytest.raises(UploadError, match="--profile"):
        upload(_saved(profile=None), url="http://127.0.0.1:9", token=TOKEN)


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
    assert retry_after_s("7") == 7.0
    assert retry_after_s(format_datetime(now + timedelta(seconds=30), usegmt=True), now=now) == 30.0
    assert retry_after_s("soon") is None
    assert retry_after_s(None) is None


def test_profile_id_is_escaped_in_the_url() -> None:
    assert (
        measurements_url("http://h:8000/", "a/b") == "http://h:8000/v1/hardware/a%2Fb/measurements"
    )


def test_saved_file_round_trip(tmp_path: Path) -> None:
    saved = _saved()
    path = tmp_path / "m.json"
    saved.save(path)
    assert SavedMeasurement.load(path) == saved


# --------------------------------------------------------------------------------------------
# Through the command line
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "detail"),
    [(401, "missing or invalid API key"), (403, "key lacks scope profiles:write"), (422, "bad")],
)
def test_cli_refusal_exits_non_zero_with_the_detail(
    tmp_path: Path, status: int, detail: str
) -> None:
    path = tmp_path / "m.json"
    _saved().save(path)
    errors = (
        [{"pointer": "/provenance/gpu_name", "detail": "does not match"}] if status == 422 else None
    )
    state = MeasurementState(script=[problem(status, detail, errors)])
    with measurement_server(state) as url:
        result = CliRunner().invoke(app, ["upload", str(path), "--url", url, "--token", TOKEN])
    assert result.exit_code == 1
    assert f"HTTP {status}" in result.output
    assert detail in result.output
    if errors:
        assert "/provenance/gpu_name: does not match" in result.output
    assert len(state.requests) == 1


def test_cli_upload_reuses_the_saved_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.json"
    saved = _saved()
    saved.save(path)
    monkeypatch.setenv("SERVESIZE_TOKEN", TOKEN)
    state = MeasurementState(
        script=[
            Answer(503, {"detail": "later"}, headers={"Retry-After": "0"}),
            Answer(201, {"id": "m-9"}),
        ]
    )
    with measurement_server(state) as url:
        first = CliRunner().invoke(app, ["upload", str(path), "--url", url])
        state.script.append(Answer(200, {"id": "m-9"}))
        again = CliRunner().invoke(
            app, ["upload", str(path), "--url", url, "--profile", "h100-pcie"]
        )
    assert first.exit_code == 0, first.output
    assert "m-9" in first.output
    assert "retrying" in first.output
    assert again.exit_code == 0, again.output
    assert "idempotent replay" in again.output
    assert {h["Idempotency-Key"] for _, h, _ in state.requests} == {saved.idempotency_key}
    assert state.requests[-1][0] == "/v1/hardware/h100-pcie/measurements"


def test_cli_upload_without_token_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SERVESIZE_TOKEN", raising=False)
    path = tmp_path / "m.json"
    _saved().save(path)
    result = CliRunner().invoke(app, ["upload", str(path), "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2
    assert "SERVESIZE_TOKEN" in result.output


def test_cli_bench_uploads_and_keeps_a_copy_when_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    state = MeasurementState(script=[problem(403, "key lacks scope profiles:write")])
    with measurement_server(state) as url:
        args = ["bench", "--device", "cpu", "--quick", "--upload", url, "--token", TOKEN]
        refused = CliRunner().invoke(app, [*args, "--profile", "cpu-host"])
        accepted = CliRunner().invoke(app, [*args, "--profile", "cpu-host"])
    assert refused.exit_code == 1
    (kept,) = tmp_path.glob("servesize-measurement-*.json")
    assert SavedMeasurement.load(kept).payload.provenance.device == "cpu"
    assert accepted.exit_code == 0, accepted.output
    assert "uploaded: measurement m-2" in accepted.output
    body = state.requests[1][2]
    assert MeasurementUpload.model_validate(body).gemm


def test_cli_endpoint_upload_needs_the_gpu_name() -> None:
    fixture = Path(__file__).parent / "fixtures" / "aiperf_profile_export_aiperf.json"
    args = ["ingest", str(fixture), "--format", "aiperf", "--upload", "http://127.0.0.1:9"]
    result = CliRunner().invoke(app, [*args, "--token", TOKEN, "--profile", "h100-sxm"])
    assert result.exit_code == 2
    assert "--gpu-name" in result.output
