"""From a plan to a running deployment and back (docs/deployment.md).

=============================  ==================================================================
``deployment_objects``         a pool's ``apps/v1`` Deployment and ``v1`` Service (dicts)
``kserve_inference_service``   the same pool as a KServe ``InferenceService``
``vllm_bench_command``         ``vllm bench serve`` at the plan's rate, lengths and warm-up
``compare_metric``             a predicted figure and its interval against the measured value
``check_slo``                  the SLO on measured statistics
=============================  ==================================================================
"""

from servesize.core.deploy.benchmark import BenchmarkJob, benchmark_script, vllm_bench_command
from servesize.core.deploy.compare import (
    MetricComparison,
    SloCheck,
    check_slo,
    compare_metric,
)
from servesize.core.deploy.manifests import (
    ENGINE_IMAGES,
    ENGINE_PORTS,
    HEALTH_PATH,
    DeploySpec,
    ModelCache,
    deployment_objects,
    kserve_inference_service,
    resource_name,
    shm_bytes_for,
)

__all__ = [
    "ENGINE_IMAGES",
    "ENGINE_PORTS",
    "HEALTH_PATH",
    "BenchmarkJob",
    "DeploySpec",
    "MetricComparison",
    "ModelCache",
    "SloCheck",
    "benchmark_script",
    "check_slo",
    "compare_metric",
    "deployment_objects",
    "kserve_inference_service",
    "resource_name",
    "shm_bytes_for",
    "vllm_bench_command",
]
