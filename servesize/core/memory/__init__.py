"""Memory ledger and KV budget: where every byte of a GPU goes when an engine serves a model.

>>> from servesize.core.architecture import parse_architecture
>>> from servesize.core.hardware import HardwareSpec
>>> arch = parse_architecture(
...     {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
...      "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
...      "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
...     name="llama-3.1-8b")
>>> h100 = HardwareSpec(id="h100", vendor="NVIDIA", name="H100 SXM", memory_bytes=80 * 2**30,
...                     memory_bandwidth_bytes_per_s=3_350_000_000_000)
>>> plan = plan_memory(arch, h100, Deployment(max_model_len=16000, engine_version="0.10.1"))
>>> plan.kv_bytes_per_token_per_gpu, plan.fits
(131072, True)
"""

from servesize.core.memory.budget import (
    KvBudget,
    sglang_kv_budget,
    trtllm_kv_budget,
    vllm_kv_budget,
)
from servesize.core.memory.calculator import KvBudgetResult, kv_budget
from servesize.core.memory.concurrency import (
    ConcurrencyEstimate,
    concurrency_at,
    concurrency_for_lengths,
)
from servesize.core.memory.constants import (
    DEFAULT_CONSTANTS,
    ConstantRow,
    MemoryConstants,
    constants_table,
)
from servesize.core.memory.deployment import (
    DEFAULT_ENGINE_VERSIONS,
    AppliedDefault,
    Deployment,
    ResolvedDeployment,
    device_total_bytes,
    resolve_deployment,
)
from servesize.core.memory.engine_defaults import (
    SglangMemoryDefaults,
    parse_version,
    sglang_memory_defaults,
    vllm_batch_defaults,
    vllm_gpu_memory_utilization,
)
from servesize.core.memory.errors import InvalidDeploymentError
from servesize.core.memory.formats import FormatKind, WeightFormat
from servesize.core.memory.kv import KvLayerSpec, KvLayout, kv_layer_specs, kv_layout
from servesize.core.memory.kv_format import KV_CACHE_DTYPES, KvCacheFormat, resolve_kv_format
from servesize.core.memory.ledger import LineItem
from servesize.core.memory.offload import (
    HostKVTier,
    KVOffload,
    ResolvedKVOffload,
    host_kv_tier,
    plan_host_tier,
)
from servesize.core.memory.plan import (
    USAGE_CATEGORIES,
    MemoryPlan,
    StageSummary,
    Suggestions,
    evaluate_memory,
    plan_memory,
)
from servesize.core.memory.scheme import WeightScheme, resolve_weight_scheme
from servesize.core.memory.units import GIB, MIB
from servesize.core.memory.weights import WeightLedger, weight_ledger

__all__ = [
    "DEFAULT_CONSTANTS",
    "DEFAULT_ENGINE_VERSIONS",
    "GIB",
    "KV_CACHE_DTYPES",
    "MIB",
    "USAGE_CATEGORIES",
    "AppliedDefault",
    "ConcurrencyEstimate",
    "ConstantRow",
    "Deployment",
    "FormatKind",
    "HostKVTier",
    "InvalidDeploymentError",
    "KVOffload",
    "KvBudget",
    "KvBudgetResult",
    "KvCacheFormat",
    "KvLayerSpec",
    "KvLayout",
    "LineItem",
    "MemoryConstants",
    "MemoryPlan",
    "ResolvedDeployment",
    "ResolvedKVOffload",
    "SglangMemoryDefaults",
    "StageSummary",
    "Suggestions",
    "WeightFormat",
    "WeightLedger",
    "WeightScheme",
    "concurrency_at",
    "concurrency_for_lengths",
    "constants_table",
    "device_total_bytes",
    "evaluate_memory",
    "host_kv_tier",
    "kv_budget",
    "kv_layer_specs",
    "kv_layout",
    "parse_version",
    "plan_host_tier",
    "plan_memory",
    "resolve_deployment",
    "resolve_kv_format",
    "resolve_weight_scheme",
    "sglang_kv_budget",
    "sglang_memory_defaults",
    "trtllm_kv_budget",
    "vllm_batch_defaults",
    "vllm_gpu_memory_utilization",
    "vllm_kv_budget",
    "weight_ledger",
]
