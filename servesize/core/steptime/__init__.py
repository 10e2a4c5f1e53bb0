"""Step time of one engine iteration, and steady-state serving estimates built on it.

``build_step_model`` compiles a model, a GPU and a deployment (explicit keyword arguments:
parallel sizes, weight/KV dtypes, engine, CUDA graphs, optional measured tables) into a
:class:`StepTimeModel`; ``StepTimeModel.step_time`` evaluates many :class:`StepWork` steps at
once; :func:`closed_loop`, :func:`zero_load_ttft_s` and :func:`max_throughput` turn step times
into serving figures.

>>> from servesize.core.architecture import parse_architecture
>>> from servesize.core.hardware import HardwareSpec
>>> gpu = HardwareSpec(id="x", vendor="v", name="X", memory_bytes=80 * 2**30,
...                    memory_bandwidth_bytes_per_s=2_000_000_000_000,
...                    peak_tflop_per_s={"bf16": 1000.0})
>>> arch = parse_architecture(
...     {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "head_dim": 128,
...      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
...      "vocab_size": 128256, "torch_dtype": "bfloat16"}, name="llama-8b")
>>> model = build_step_model(arch, gpu, engine="vllm", calibrated=False)
>>> step = model.step_time(StepWork.decode(batch_size=[1, 2048], context_tokens=16))
>>> step.bound.tolist()
['memory', 'compute']
"""

from servesize.core.steptime.communication import (
    DEFAULT_COLLECTIVE_LATENCY_S,
    DEFAULT_LINK_EFFICIENCY,
    all_reduce_time_s,
    all_to_all_time_s,
    point_to_point_time_s,
)
from servesize.core.steptime.engines import (
    ENGINE_PROFILES,
    KNOWN_ENGINES,
    EngineProfile,
    engine_profile,
    simulator_constants,
)
from servesize.core.steptime.experts import (
    DEFAULT_MOE_KERNEL,
    MoeKernelConstants,
    MoeLayerShape,
    expected_padded_rows,
    moe_layer_time_s,
)
from servesize.core.steptime.model import (
    BOUNDS,
    StepTime,
    StepTimeModel,
    build_step_model,
    checkpoint_weight_dtypes,
)
from servesize.core.steptime.openloop import OpenLoopEstimate, open_loop
from servesize.core.steptime.operators import (
    AttentionOp,
    GemmOp,
    MoeOp,
    OperatorInventory,
    operator_inventory,
)
from servesize.core.steptime.rates import (
    DEFAULT_GEMM_EFFICIENCY_BY_DTYPE,
    DEFAULT_KERNEL_FLOOR_S,
    DeviceRates,
)
from servesize.core.steptime.recalibration import (
    RECALIBRATION_BOUNDS,
    LevelPrediction,
    MeasuredLevel,
    MetricErrors,
    Recalibration,
    RecalibrationError,
    apply_recalibration,
    fit_recalibration,
)
from servesize.core.steptime.routing import expected_experts_touched
from servesize.core.steptime.scaling import (
    GpuRatios,
    gpu_ratios,
    scale_kernel_time_s,
    scale_measured_profile,
    wave_quantisation,
)
from servesize.core.steptime.serving import (
    ServingEstimate,
    closed_loop,
    max_throughput,
    prefill_time_s,
    resident_capacity,
    zero_load_ttft_s,
)
from servesize.core.steptime.tables import (
    AttentionTable,
    CollectiveTable,
    GemmTable,
    MeasuredProfile,
    MoeTable,
)
from servesize.core.steptime.work import StepWork, causal_pairs

__all__ = [
    "BOUNDS",
    "DEFAULT_COLLECTIVE_LATENCY_S",
    "DEFAULT_GEMM_EFFICIENCY_BY_DTYPE",
    "DEFAULT_KERNEL_FLOOR_S",
    "DEFAULT_LINK_EFFICIENCY",
    "DEFAULT_MOE_KERNEL",
    "ENGINE_PROFILES",
    "KNOWN_ENGINES",
    "RECALIBRATION_BOUNDS",
    "AttentionOp",
    "AttentionTable",
    "CollectiveTable",
    "DeviceRates",
    "EngineProfile",
    "GemmOp",
    "GemmTable",
    "GpuRatios",
    "LevelPrediction",
    "MeasuredLevel",
    "MeasuredProfile",
    "MetricErrors",
    "MoeKernelConstants",
    "MoeLayerShape",
    "MoeOp",
    "MoeTable",
    "OpenLoopEstimate",
    "OperatorInventory",
    "Recalibration",
    "RecalibrationError",
    "ServingEstimate",
    "StepTime",
    "StepTimeModel",
    "StepWork",
    "all_reduce_time_s",
    "all_to_all_time_s",
    "apply_recalibration",
    "build_step_model",
    "causal_pairs",
    "checkpoint_weight_dtypes",
    "closed_loop",
    "engine_profile",
    "expected_experts_touched",
    "expected_padded_rows",
    "fit_recalibration",
    "gpu_ratios",
    "max_throughput",
    "moe_layer_time_s",
    "open_loop",
    "operator_inventory",
    "point_to_point_time_s",
    "prefill_time_s",
    "resident_capacity",
    "scale_kernel_time_s",
    "scale_measured_profile",
    "simulator_constants",
    "wave_quantisation",
    "zero_load_ttft_s",
]
