"""From a plan to a running deployment and back (docs/deployment.md).

=============================  ==================================================================
``deployment_objects``         a pool's ``apps/v1`` Deployment and ``v1`` Service (dicts)
``kserve_inference_service``   the same pool as a KServe ``InferenceService``
``vllm_bench_command``         ``vllm bench serve`` at the plan's rate, lengths and warm-up
``compare_metric``             a predicted figure and its interval against the measured value
``check_slo``                  the SLO on measured statistics
``accuracy_summary``           median ratio and MAPE of stored verifications per engine/hardware
``llmd_values``                values for llm-d's ModelService Helm chart (vLLM plans)
``plan_objects``               every object of a plan from its launch commands (ConfigMaps,
                               Deployments, LeaderWorkerSets, the router)
=============================  ==================================================================
"""

from servesize.core.deploy.accuracy import (
    ACCURACY_METRICS,
    AccuracyGroup,
    MetricAccuracy,
    accuracy_summary,
)
from servesize.core.deploy.benchmark import BenchmarkJob, benchmark_script, vllm_bench_command
from servesize.core.deploy.compare import (
    MetricComparison,
    SloCheck,
    check_slo,
    compare_metric,
)
from servesize.core.deploy.llmd import LLMD_CHART, LLMD_CHART_VERSION, llmd_values
from servesize.core.deploy.manifests import (
    ENGINE_IMAGES,
    ENGINE_PORTS,
    HEALTH_PATH,
    DeploySpec,
    ModelCache,
    config_map,
    deployment_objects,
    kserve_inference_service,
    resource_name,
    shm_bytes_for,
)
from servesize.core.deploy.objects import (
    LWS_API_VERSION,
    PlanCommand,
    PlanDeployment,
    PlanObjects,
    plan_objects,
)

__all__ = [
    "ACCURACY_METRICS",
    "ENGINE_IMAGES",
    "ENGINE_PORTS",
    "HEALTH_PATH",
    "LLMD_CHART",
    "LLMD_CHART_VERSION",
    "LWS_API_VERSION",
    "AccuracyGroup",
    "BenchmarkJob",
    "DeploySpec",
    "MetricAccuracy",
    "MetricComparison",
    "ModelCache",
    "PlanCommand",
    "PlanDeployment",
    "PlanObjects",
    "SloCheck",
    "accuracy_summary",
    "benchmark_script",
    "check_slo",
    "compare_metric",
    "config_map",
    "deployment_objects",
    "kserve_inference_service",
    "llmd_values",
    "plan_objects",
    "resource_name",
    "shm_bytes_for",
    "vllm_bench_command",
]
