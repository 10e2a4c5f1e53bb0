"""The continuous-batching serving simulator over HTTP.

The route hands the simulation to the heavy gate (:mod:`servesize.api.compute`): a worker
thread, so a long simulation does not block the event loop, at most ``HEAVY_WORKERS`` at once,
a deadline, and no database session while it runs. The work one request may ask for is bounded
by ``MAX_REQUESTS`` and ``MAX_EXPECTED_TOKENS`` (a 422 says which bound was hit).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from servesize.api.compute import GatesDep
from servesize.api.deps import LookupsDep, ReadAccess
from servesize.api.errors import UnprocessableError
from servesize.api.render.uncertainty import simulate_bands
from servesize.api.replica_resolver import ReplicaInputs, request_inputs, request_replica
from servesize.api.simulate_views import latency_out, simulate_response
from servesize.api.simulation_runner import run_simulation
from servesize.api.trace_views import with_stored_trace
from servesize.core.simulation import ClientOverheads
from servesize.schemas.simulate import SimulateRequest, SimulateResponse

__all__ = ["EXAMPLES", "check_replicas", "latency_out", "router"]

router = APIRouter(prefix="/v1", tags=["simulation"], dependencies=[ReadAccess])


_SMALL: dict[str, Any] = {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"}
EXAMPLES: dict[str, dict[str, Any]] = {
    "poisson": {
        "summary": "Open loop, Poisson arrivals at 4 requests/s",
        "value": _SMALL
        | {
            "traffic": {
                "arrival": {"process": "poisson", "rate_per_s": 4},
                "input_tokens": 512,
                "output_tokens": 64,
                "num_requests": 200,
                "warmup_requests": 20,
            },
            "slo": {"ttft_s": 0.5, "tpot_s": 0.05},
        },
    },
    "bursty": {
        "summary": "Bursty gamma arrivals (cv 2), lengths from distributions and a histogram",
        "value": _SMALL
        | {
            "traffic": {
                "arrival": {"process": "gamma", "rate_per_s": 4, "cv": 2},
                "input_tokens": {"kind": "lognormal", "mean_tokens": 512, "cv": 0.5},
                "output_tokens": {
                    "kind": "histogram",
                    "tokens": [16, 64, 256],
                    "weights": [0.3, 0.5, 0.2],
                },
                "num_requests": 200,
                "warmup_requests": 20,
                "cooldown_requests": 20,
            },
            "overheads": {"preprocess_s": 0.005, "network_rtt_s": 0.02},
        },
    },
    "closed_loop": {
        "summary": "Closed loop: 8 clients, 1 s think time",
        "value": _SMALL
        | {
            "traffic": {
                "mode": "closed_loop",
                "concurrency": 8,
                "think_time_s": 1.0,
                "input_tokens": 512,
                "output_tokens": 64,
                "num_requests": 120,
                "warmup_requests": 16,
            }
        },
    },
    "trace": {
        "summary": "Replay an inline trace",
        "value": _SMALL
        | {
            "traffic": {
                "trace": {
                    "arrival_s": [0.0, 0.1, 0.25, 0.4, 0.9],
                    "input_tokens": [512, 2048, 128, 1024, 300],
                    "output_tokens": [64, 256, 32, 128, 16],
                }
            }
        },
    },
    "sessions": {
        "summary": "Multi-turn sessions: 4 turns, 5 s think time, the history resent",
        "value": _SMALL
        | {
            "traffic": {
                "sessions": {
                    "sessions_per_s": 0.5,
                    "num_sessions": 50,
                    "turns": 4,
                    "think_time_s": 5.0,
                    "new_tokens": 200,
                    "output_tokens": 150,
                }
            }
        },
    },
    "trace_file": {
        "summary": "Replay a Mooncake JSONL trace file (its text)",
        "value": _SMALL
        | {
            "traffic": {
                "trace": {
                    "format": "jsonl",
                    "file": (
                        '{"timestamp": 0, "input_length": 655, "output_length": 52}\n'
                        '{"timestamp": 350, "input_length": 672, "output_length": 26}\n'
                        '{"timestamp": 900, "input_length": 655, "output_length": 52}\n'
                    ),
                }
            }
        },
    },
    "disaggregated": {
        "summary": "Prefill/decode disaggregation: 1 prefill and 2 decode replicas",
        "value": _SMALL
        | {
            "traffic": {
                "arrival": {"process": "poisson", "rate_per_s": 4},
                "input_tokens": 1024,
                "output_tokens": 64,
                "num_requests": 200,
                "warmup_requests": 20,
            },
            "disaggregation": {
                "prefill_replicas": 1,
                "decode_replicas": 2,
                "kv_transfer": {"latency_s": 0.001},
            },
        },
    },
}


def check_replicas(body: SimulateRequest) -> None:
    """With disaggregation the pools set the replicas: ``replicas`` must stay 1."""
    if body.disaggregation is not None and body.replicas != 1:
        raise UnprocessableError(
            "with disaggregation the pools set the replicas; leave replicas at 1",
            slug="invalid-replicas",
            errors=[{"location": "body", "pointer": "/replicas", "detail": "must be 1"}],
        )


def _simulate(body: SimulateRequest, inputs: ReplicaInputs) -> SimulateResponse:
    built = request_replica(body, inputs)
    overheads = body.overheads
    run = run_simulation(
        built,
        body.traffic,
        replicas=body.replicas,
        routing=body.routing,
        policy=body.policy,
        overheads=ClientOverheads(**overheads.model_dump()) if overheads is not None else None,
        disaggregation=body.disaggregation,
    )
    return simulate_bands(body, built, simulate_response(body, built, run))


@router.post("/simulate", response_model=SimulateResponse)
async def simulate_serving(
    body: Annotated[SimulateRequest, Body(openapi_examples=EXAMPLES)],
    request: Request,
    lookups: LookupsDep,
    gates: GatesDep,
) -> SimulateResponse:
    """Simulate a continuous-batching engine iteration by iteration under the given traffic
    (Poisson, gamma, constant, closed loop or a replayed trace): TTFT, ITL, TPOT and E2E
    distributions — client-observed and engine-internal — throughput, goodput, failures,
    stability; optionally prefill/decode disaggregation."""
    check_replicas(body)

    def lookup() -> tuple[SimulateRequest, ReplicaInputs]:
        return with_stored_trace(body, lookups.factory), request_inputs(body, lookups)

    return await gates.heavy.run(request, lambda found: _simulate(*found), lookup)
