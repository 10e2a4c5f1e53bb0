"""The OpenAPI document as clients and generators need it.

FastAPI's document is refined once, in place, when it is first built:

* ``components.securitySchemes.bearerAuth`` (``Authorization: Bearer ssk_<key_id>_<secret>``)
  and a ``security`` requirement on every operation: the scope a write needs (OpenAPI 3.1 lets
  an HTTP scheme list role names), ``[{}, {bearerAuth: []}]`` where a key is optional, ``[]``
  on the probes;
* ``components.schemas.Problem`` (RFC 9457 plus ``errors[]``, each field's JSON pointer) as the
  ``application/problem+json`` body of every error response, and every status an operation can
  answer with (401/403 from keys, 400/413/415 from the body guard, 404, 409, 412/428 from
  ``If-Match``, 422, 429 from the rate limiter, 503 when the database is away);
* ``Idempotency-Key`` and ``If-Match`` marked ``required`` where a request without them is
  refused (400 and 428: the handler answers the problem, so the parameter stays optional
  in Python);
* hand-chosen ``operationId``s (:data:`OPERATION_IDS`), request examples on every body
  (:data:`REQUEST_EXAMPLES`), and ``links`` from each created resource to the operations on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from inspect import getclosurevars
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from servesize.api.problems import PROBLEM_MEDIA_TYPE
from servesize.schemas.models import LLAMA_3_1_8B_CONFIG
from servesize.security import KEY_PREFIX, Scope

Json = dict[str, Any]
SECURITY_SCHEME = "bearerAuth"

OPERATION_IDS: dict[str, str] = {
    "livez": "getLiveness",
    "readyz": "getReadiness",
    "metrics": "getMetrics",
    "list_keys": "listApiKeys",
    "create_key": "createApiKey",
    "revoke_key": "revokeApiKey",
    "list_models": "listModels",
    "register_model": "registerModel",
    "inspect_model": "inspectModel",
    "get_model": "getModel",
    "delete_model": "deleteModel",
    "list_profiles": "listHardwareProfiles",
    "create_profile": "createHardwareProfile",
    "get_profile": "getHardwareProfile",
    "patch_profile": "updateHardwareProfile",
    "delete_profile": "deleteHardwareProfile",
    "upload_measurement": "uploadMeasurement",
    "list_measurements": "listMeasurements",
    "get_measurement": "getMeasurement",
    "memory": "planMemory",
    "kv_budget_endpoint": "computeKvBudget",
    "performance": "estimatePerformance",
    "queueing": "solveQueue",
    "simulate_serving": "simulateServing",
    "evaluate_slo": "evaluateSlo",
    "slo_capacity": "findSloCapacity",
    "sizing": "createSizing",
    "get_plan": "getPlan",
    "get_manifests": "getPlanManifests",
    "list_benchmarks": "listPlanBenchmarks",
    "verify": "verifyPlan",
    "list_verifications": "listPlanVerifications",
    "get_accuracy": "getAccuracyReport",
    "submit_job": "submitJob",
    "list_jobs": "listJobs",
    "get_job": "getJob",
    "cancel_job": "cancelJob",
    "get_job_csv": "getJobCsv",
    "post_recalibration": "recalibrateEngine",
    "get_recalibrations": "listRecalibrations",
    "delete_recalibration": "deleteRecalibration",
    "upload_trace": "uploadTrace",
    "get_trace": "getTrace",
    "delete_trace": "deleteTrace",
}
"""Endpoint function name → ``operationId``; the names generated clients expose as methods."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def operation_id(route: APIRoute) -> str:
    """``generate_unique_id_function``: the hand-chosen id, else the function name in camelCase."""
    return OPERATION_IDS.get(route.name, _camel(route.name))


H100_UPLOAD: Json = {
    "provenance": {
        "agent_version": "0.1.0",
        "method_version": 1,
        "host": "gpu-node-1",
        "device": "cuda:0",
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_memory_bytes": 85_520_809_984,
        "measured_at": "2026-11-29T10:00:00Z",
    },
    # 2·4096³ FLOP / 1.7371e-4 s = 791.2 TFLOP/s, 0.8 of the H100 SXM bf16 dense peak (989.4).
    "gemm": [
        {
            "dtype": "bf16",
            "m": 4096,
            "n": 4096,
            "k": 4096,
            "latency_s": 2 * 4096**3 / 791.2e12,
            "achieved_tflop_per_s": 791.2,
        }
    ],
    # 2 GiB copied at 2.8475e12 B/s: 0.85 of the 3.35e12 B/s HBM3 peak.
    "memory_bandwidth": [
        {
            "kind": "copy",
            "bytes_moved": 2 * 2**30,
            "latency_s": 2 * 2**30 / 2.8475e12,
            "achieved_bytes_per_s": 2.8475e12,
        }
    ],
    "kernel_launch_overhead_s": 4.5e-6,
}

REQUEST_EXAMPLES: dict[str, dict[str, Json]] = {
    "createApiKey": {
        "uploader": {
            "summary": "A key for a measuring agent",
            "value": {"name": "ci-uploader", "scopes": ["profiles:write"]},
        }
    },
    "registerModel": {
        "llama": {
            "summary": "A fine-tune with Llama-3.1-8B's architecture",
            "value": {"id": "acme/llama-8b-ft", "hf_config": LLAMA_3_1_8B_CONFIG},
        }
    },
    "inspectModel": {
        "llama": {
            "summary": "Llama-3.1-8B's config.json",
            "value": {"hf_config": LLAMA_3_1_8B_CONFIG, "name": "my-llama-8b"},
        }
    },
    "createHardwareProfile": {
        "lab_h100": {
            "summary": "An H100 SXM with a lab's own price",
            "value": {
                "id": "h100-sxm-lab-a",
                "vendor": "nvidia",
                "name": "H100 SXM (lab A)",
                "memory_bytes": 80 * 10**9,
                "memory_bandwidth_bytes_per_s": 3_350_000_000_000,
                "peak_tflop_per_s": {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
                "price": {
                    "per_gpu_hour": 2.5,
                    "currency": "USD",
                    "as_of": "2026-11-01",
                    "source": "lab A's cloud contract",
                },
            },
        }
    },
    "updateHardwareProfile": {
        "notes": {"summary": "Annotate a profile", "value": {"notes": "rack 3, air-cooled"}}
    },
    "uploadMeasurement": {
        "h100": {"summary": "What servesize-agent measures on an H100 SXM", "value": H100_UPLOAD}
    },
    "planMemory": {
        "llama_h100": {
            "summary": "Llama-3.1-8B on one H100 SXM",
            "value": {
                "model": "meta-llama/Llama-3.1-8B",
                "hardware": "h100-sxm",
                "deployment": {"tensor_parallel_size": 1},
                "request_lengths": [4096, 32768],
            },
        }
    },
    "computeKvBudget": {
        "geometry": {
            "summary": "32 layers × 8 KV heads × 128 dims in bf16: sequences that fit in 40 GB",
            "value": {
                "num_layers": 32,
                "num_kv_heads": 8,
                "head_dim": 128,
                "bytes_per_element": 2,
                "tokens_per_sequence": 8192,
                "memory_bytes": 40 * 10**9,
            },
        }
    },
    "estimatePerformance": {
        "llama_h100": {
            "summary": "Llama-3.1-8B on one H100 SXM",
            "value": {"model": "meta-llama/Llama-3.1-8B", "hardware": "h100-sxm"},
        },
        "sessions": {
            "summary": "Multi-turn sessions as their mean turn (history as the cache's hits)",
            "value": {
                "model": "meta-llama/Llama-3.1-8B",
                "hardware": "h100-sxm",
                "workload": {
                    "concurrency": 8,
                    "sessions": {
                        "sessions_per_s": 0.5,
                        "turns": 3,
                        "new_tokens": 100,
                        "output_tokens": 50,
                    },
                },
            },
        },
    },
}
"""Examples for request bodies whose route documents none (the others carry their own)."""

PROBLEM_SCHEMA: Json = {
    "title": "Problem",
    "type": "object",
    "description": "RFC 9457 problem details; ``type`` is ``urn:servesize:problem:<slug>``. "
    "Other members (``required_scope``, ``current_etag``, ``max_body_bytes``, ``request_id``, "
    "...) are extensions of the problem type.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "examples": ["urn:servesize:problem:validation-error"]},
        "title": {"type": "string", "examples": ["Unprocessable Entity"]},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string"},
        "instance": {"type": "string", "description": "The request path."},
        "errors": {
            "type": "array",
            "description": "One entry per field at fault.",
            "items": {"$ref": "#/components/schemas/ProblemFieldError"},
        },
    },
    "additionalProperties": True,
}
PROBLEM_FIELD_ERROR_SCHEMA: Json = {
    "title": "ProblemFieldError",
    "type": "object",
    "required": ["pointer", "detail"],
    "properties": {
        "location": {
            "type": "string",
            "description": "Where the field is: body, query, path or header.",
            "examples": ["body"],
        },
        "pointer": {
            "type": "string",
            "description": "RFC 6901 JSON pointer into the location (empty: the whole of it).",
            "examples": ["/deployment/tensor_parallel_size"],
        },
        "detail": {"type": "string"},
        "type": {"type": "string", "description": "The validation rule that failed."},
    },
    "additionalProperties": True,
}

ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "Malformed request: invalid JSON, NaN/Infinity, nesting deeper than 64, "
    "or a missing Idempotency-Key",
    401: "No API key where one is needed, or the key is unknown or revoked",
    403: "The API key lacks the scope this operation needs",
    404: "No such resource (or no such model or hardware profile in the request)",
    409: "The write conflicts with stored data",
    412: "If-Match does not match the resource's current ETag",
    413: "The request body exceeds the size limit",
    415: "The body is not application/json",
    422: "Validation failed; `errors` names each field with its pointer",
    428: "If-Match is required",
    429: "Rate limited; retry after Retry-After seconds",
    503: "The database is unavailable; retry after Retry-After seconds",
}
_RETRY_AFTER: Json = {
    "Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}
}
ERROR_HEADERS: dict[int, Json] = {
    401: {
        "WWW-Authenticate": {
            "description": 'Bearer realm="servesize"',
            "schema": {"type": "string"},
        }
    },
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}

EXTRA_STATUSES: dict[str, tuple[int, ...]] = {
    "createApiKey": (409,),
    "registerModel": (409,),
    "deleteModel": (409,),
    "createHardwareProfile": (409,),
    # 400: an If-Match header that is not an entity-tag list (RFC 9110 §13.1.1).
    "updateHardwareProfile": (400, 412, 428),
    "deleteHardwareProfile": (400, 409, 412, 428),
    "uploadMeasurement": (400, 409),
    # A finished job cannot be cancelled; a submission names a model or profile that does not
    # exist, or reuses an Idempotency-Key with another body.
    "cancelJob": (409,),
    "getJobCsv": (409,),
    "submitJob": (404, 409),
    # apply: scope and If-Match (400 malformed, 412 stale, 428 missing); 404 unknown model.
    "recalibrateEngine": (400, 403, 404, 412, 428),
    "deleteRecalibration": (400, 412, 428),
    # A model or hardware profile named in the body that does not exist.
    **dict.fromkeys(
        (
            "planMemory",
            "computeKvBudget",
            "estimatePerformance",
            "solveQueue",
            "simulateServing",
            "evaluateSlo",
            "findSloCapacity",
        ),
        (404,),
    ),
    # save=true with a key that lacks plans:write.
    "createSizing": (403, 404),
}
"""Statuses an operation answers beyond those its shape implies (see :func:`_statuses`)."""

HTML_REPORT_OPERATIONS = ("planMemory", "findSloCapacity", "simulateServing", "createSizing")
"""Operations whose answer is also an HTML report (:mod:`servesize.api.html_reports`)."""
HTML_FORMAT_PARAMETER: Json = {
    "name": "format",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "enum": ["json", "html"], "default": "json"},
    "description": "`html`: the answer as one self-contained HTML report (the planner page's "
    "figures, request and answer inlined) instead of JSON; `Accept: text/html` does the same.",
}


def _document_html_report(op: Json) -> None:
    op.setdefault("parameters", []).append(HTML_FORMAT_PARAMETER)
    for code in ("200", "201"):
        content = op.get("responses", {}).get(code, {}).get("content")
        if content is not None:
            content["text/html"] = {"schema": {"type": "string"}}


REQUIRED_HEADERS: dict[str, tuple[str, ...]] = {
    "updateHardwareProfile": ("if-match",),
    "deleteHardwareProfile": ("if-match",),
    "deleteRecalibration": ("if-match",),
    "uploadMeasurement": ("idempotency-key",),
}
"""Headers the handler refuses a request without (428 for If-Match, 400 for Idempotency-Key)."""

LINKS: dict[tuple[str, str], dict[str, Json]] = {
    ("createApiKey", "201"): {
        "RevokeKey": {
            "operationId": "revokeApiKey",
            "parameters": {"key_id": "$response.body#/key_id"},
        }
    },
    ("registerModel", "201"): {
        "GetModel": {"operationId": "getModel", "parameters": {"model_id": "$response.body#/id"}},
        "DeleteModel": {
            "operationId": "deleteModel",
            "parameters": {"model_id": "$response.body#/id"},
        },
    },
    ("createHardwareProfile", "201"): {
        "GetProfile": {
            "operationId": "getHardwareProfile",
            "parameters": {"profile_id": "$response.body#/id"},
        },
        "UpdateProfile": {
            "operationId": "updateHardwareProfile",
            "parameters": {
                "profile_id": "$response.body#/id",
                "header.If-Match": "$response.header.ETag",
            },
        },
        "DeleteProfile": {
            "operationId": "deleteHardwareProfile",
            "parameters": {
                "profile_id": "$response.body#/id",
                "header.If-Match": "$response.header.ETag",
            },
        },
        "UploadMeasurement": {
            "operationId": "uploadMeasurement",
            "parameters": {"profile_id": "$response.body#/id"},
        },
        "ListMeasurements": {
            "operationId": "listMeasurements",
            "parameters": {"profile_id": "$response.body#/id"},
        },
    },
    ("getHardwareProfile", "200"): {
        "UpdateProfile": {
            "operationId": "updateHardwareProfile",
            "parameters": {
                "profile_id": "$request.path.profile_id",
                "header.If-Match": "$response.header.ETag",
            },
        }
    },
    ("uploadMeasurement", "201"): {
        "GetMeasurement": {
            "operationId": "getMeasurement",
            "parameters": {
                "profile_id": "$request.path.profile_id",
                "measurement_id": "$response.body#/id",
            },
        }
    },
}
"""OpenAPI links: where each response's ids lead (used by generated clients and stateful tests)."""

_METHODS = ("get", "put", "post", "patch", "delete")


KEY_REQUIRED_DEPENDENCIES = frozenset({"reader_key"})
"""Dependencies that refuse a request without a key (401) but accept any scope."""


def _required_scope(route: APIRoute) -> Scope | bool | None:
    """The scope a route's key dependency demands, ``True`` if it needs a key of any scope
    (``KEY_REQUIRED_DEPENDENCIES``), ``None`` if a key is optional (the routers' read access),
    ``False`` if no key is looked at. Read from ``require_scope``'s closure."""
    found: Scope | bool | None = False
    stack = [route.dependant]
    while stack:
        dependant = stack.pop()
        call = dependant.call
        name = getattr(call, "__name__", "")
        if name in KEY_REQUIRED_DEPENDENCIES:
            found = True
        if call is not None and name in {"optional_key", "read_access"}:
            found = None if found is False else found
        if call is not None and hasattr(call, "__code__"):
            scope = getclosurevars(call).nonlocals.get("scope")
            if isinstance(scope, Scope):
                return scope
        stack.extend(dependant.dependencies)
    return found


def _statuses(op: Json, path: str, scope: Scope | bool | None) -> set[int]:
    statuses: set[int] = set()
    has_params = bool(op.get("parameters")) or "requestBody" in op
    if has_params:
        statuses.add(422)
    if path.startswith("/v1"):
        statuses |= {401, 429, 503}
    if isinstance(scope, Scope):
        statuses.add(403)
    if "requestBody" in op:
        statuses |= {400, 413, 415}
    if "{" in path:
        statuses.add(404)
    if path == "/readyz":
        statuses.add(503)
    statuses |= set(EXTRA_STATUSES.get(op["operationId"], ()))
    return statuses


def _problem_response(status: int, existing: Json | None) -> Json:
    response: Json = {
        "description": (existing or {}).get("description") or ERROR_DESCRIPTIONS[status],
        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }
    if status in ERROR_HEADERS:
        response["headers"] = ERROR_HEADERS[status]
    return response


def _unique_schema_names(spec: Json) -> Json:
    """Rename the components FastAPI qualifies by module (two classes named ``SloIn``:
    ``servesize__schemas__simulate__SloIn``) to ``SimulateSloIn`` and ``SloIn``, titles too:
    generators name their classes by title, and two equal titles are one class too many."""
    schemas = spec.get("components", {}).get("schemas", {})
    renames: dict[str, str] = {}
    for key in schemas:
        if "__" in key:
            module, name = key.split("__")[-2:]
            prefix = module.capitalize()
            renames[key] = name if name.startswith(prefix) else prefix + name
    if not renames:
        return spec
    text = json.dumps(spec)
    for old, new in renames.items():
        text = text.replace(f'"#/components/schemas/{old}"', f'"#/components/schemas/{new}"')
    renamed: Json = json.loads(text)
    components = renamed["components"]["schemas"]
    for old, new in renames.items():
        components[new] = components.pop(old)
        components[new]["title"] = new
    return renamed


def refine(spec: Json, routes: Iterable[APIRoute]) -> Json:
    """Apply every refinement of the module docstring to FastAPI's ``spec``."""
    spec = _unique_schema_names(spec)
    components = spec.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = PROBLEM_SCHEMA
    schemas["ProblemFieldError"] = PROBLEM_FIELD_ERROR_SCHEMA
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    components["securitySchemes"] = {
        SECURITY_SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": f"{KEY_PREFIX}_<key_id>_<secret>",
            "description": "An API key from `servesize keys create` or POST /v1/keys.",
        }
    }
    scopes = {
        (method.lower(), route.path_format): _required_scope(route)
        for route in routes
        for method in route.methods or ()
    }
    for path, item in spec.get("paths", {}).items():
        for method in _METHODS:
            op = item.get(method)
            if op is None:
                continue
            scope = scopes.get((method, path), False)
            if isinstance(scope, Scope):
                op["security"] = [{SECURITY_SCHEME: [scope.value]}]
                op["description"] = (
                    op.get("description", "") + f"\n\nNeeds an API key with scope `{scope.value}`."
                ).strip()
            elif scope is True:
                op["security"] = [{SECURITY_SCHEME: []}]
            elif scope is None:
                op["security"] = [{}, {SECURITY_SCHEME: []}]
            else:
                op["security"] = []
            responses = op.setdefault("responses", {})
            documented = {
                code: responses.pop(code)
                for code in list(responses)
                if code.isdigit() and int(code) >= 400
            }
            for status in sorted(_statuses(op, path, scope)):
                responses[str(status)] = _problem_response(status, documented.get(str(status)))
            if op["operationId"] in HTML_REPORT_OPERATIONS:
                _document_html_report(op)
            required = REQUIRED_HEADERS.get(op["operationId"], ())
            for parameter in op.get("parameters", []):
                if parameter["in"] == "header" and parameter["name"].lower() in required:
                    parameter["required"] = True
                    parameter["schema"] = {"type": "string", "minLength": 1, "maxLength": 255}
            examples = REQUEST_EXAMPLES.get(op["operationId"])
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if examples is not None and body is not None and "examples" not in body:
                body["examples"] = examples
            for (link_op, code), links in LINKS.items():
                if link_op == op["operationId"] and code in responses:
                    responses[code]["links"] = links
    return spec


def api_routes(routes: Iterable[BaseRoute]) -> Iterator[APIRoute]:
    """Every endpoint route, through included routers (FastAPI >= 0.160 keeps them nested)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        nested = getattr(route, "original_router", None) or getattr(route, "app", None)
        if isinstance(nested, APIRouter):
            yield from api_routes(nested.routes)


def install_openapi(app: FastAPI) -> None:
    """Serve :func:`refine`'s document; it is built once, on first request."""
    build = app.openapi
    built: list[Json] = []

    def openapi() -> Json:
        if not built:
            built.append(refine(build(), api_routes(app.routes)))
        return built[0]

    app.openapi = openapi  # type: ignore[method-assign]
