"""Measured data in: kernel tables and serving rows loaded from CSV, the accuracy report, and
the fit of the per-engine constants. IO lives here; the maths is in :mod:`servesize.core`."""

from servesize.calibration.cases import (
    CATALOGUE_ALIASES,
    ServingCase,
    catalogue_id_for,
    kv_capacity_tokens_estimate,
    resolve_cases,
    tpot_lower_bound_s,
)
from servesize.calibration.evaluation import (
    ErrorPair,
    ErrorSummary,
    ServingPredictions,
    compile_models,
    evaluate_serving,
    serving_errors,
    steady_state_cases,
)
from servesize.calibration.fitting import FITTED_BOUNDS, fit_engine_constants
from servesize.calibration.kernel_accuracy import KernelErrors, kernel_accuracy
from servesize.calibration.kernel_tables import (
    H100_DATA_DIRECTORY,
    load_attention_tables,
    load_collective_tables,
    load_gemm_tables,
    load_measured_profile,
    load_mla_tables,
    load_moe_tables,
    tables_for_gpu,
)
from servesize.calibration.moe_kernel import (
    MoeKernelErrors,
    datasheet_rates,
    fit_moe_kernel,
    moe_kernel_errors,
)
from servesize.calibration.offline import (
    OFFLINE_CSV,
    OfflinePrediction,
    OfflineRow,
    OfflineSummary,
    load_offline_rows,
    predict_offline,
    summarise_offline,
)
from servesize.calibration.reference import GPUS_JSON, reference_gpu
from servesize.calibration.report import (
    CALIBRATION_MODELS,
    VARIANTS,
    AccuracyReport,
    accuracy_report,
)
from servesize.calibration.serving_rows import (
    E2E_SERVING_CSV,
    ServingMeasurement,
    load_serving_measurements,
)

__all__ = [
    "CALIBRATION_MODELS",
    "CATALOGUE_ALIASES",
    "E2E_SERVING_CSV",
    "FITTED_BOUNDS",
    "GPUS_JSON",
    "H100_DATA_DIRECTORY",
    "OFFLINE_CSV",
    "VARIANTS",
    "AccuracyReport",
    "ErrorPair",
    "ErrorSummary",
    "KernelErrors",
    "MoeKernelErrors",
    "OfflinePrediction",
    "OfflineRow",
    "OfflineSummary",
    "ServingCase",
    "ServingMeasurement",
    "ServingPredictions",
    "accuracy_report",
    "catalogue_id_for",
    "compile_models",
    "datasheet_rates",
    "evaluate_serving",
    "fit_engine_constants",
    "fit_moe_kernel",
    "kernel_accuracy",
    "kv_capacity_tokens_estimate",
    "load_attention_tables",
    "load_collective_tables",
    "load_gemm_tables",
    "load_measured_profile",
    "load_mla_tables",
    "load_moe_tables",
    "load_offline_rows",
    "load_serving_measurements",
    "moe_kernel_errors",
    "predict_offline",
    "reference_gpu",
    "resolve_cases",
    "serving_errors",
    "steady_state_cases",
    "summarise_offline",
    "tables_for_gpu",
    "tpot_lower_bound_s",
]
