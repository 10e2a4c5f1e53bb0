"""Workload generation for the serving simulator: arrivals, token lengths, open and closed loops.

The caller always passes a ``numpy.random.Generator``; nothing here touches a global RNG.

=============================  ================================================================
``open_loop_workload``         Poisson / gamma(cv) / constant send times + length distributions
``trace_workload``             replay given send times and lengths
``closed_loop_workload``       ``N`` clients with optional think time
``session_workload``           multi-turn sessions: history resent, think time between turns
``unit_rate_arrival_times``    the common-random-numbers skeleton ``U`` (arrivals = ``U / λ``)
``OpenLoopWorkload.with_rate`` rescale a workload to another rate, lengths kept
=============================  ================================================================
"""

from servesize.core.traffic.arrivals import ArrivalProcess, arrival_times_s, unit_rate_arrival_times
from servesize.core.traffic.lengths import (
    FixedLength,
    GeometricLength,
    HistogramLength,
    LengthDistribution,
    LogNormalLength,
    NormalLength,
    UniformLength,
)
from servesize.core.traffic.prefix import (
    PrefixAssignment,
    PrefixCacheEstimate,
    PrefixTraffic,
    assign_prefixes,
    che_lru_hit_probability,
    prefix_hit_tokens,
    steady_state_hits,
)
from servesize.core.traffic.sessions import (
    SessionMeans,
    SessionTraffic,
    SessionWorkload,
    session_means,
    session_workload,
)
from servesize.core.traffic.traces import (
    TRACE_FORMATS,
    Trace,
    TraceError,
    TraceFormat,
    check_trace,
    parse_trace,
    trace_format_of,
)
from servesize.core.traffic.workload import (
    CLOSED_LOOP_WARNING,
    ClosedLoopWorkload,
    OpenLoopWorkload,
    ThinkProcess,
    Workload,
    closed_loop_workload,
    open_loop_workload,
    trace_workload,
    with_prefixes,
)

__all__ = [
    "CLOSED_LOOP_WARNING",
    "TRACE_FORMATS",
    "ArrivalProcess",
    "ClosedLoopWorkload",
    "FixedLength",
    "GeometricLength",
    "HistogramLength",
    "LengthDistribution",
    "LogNormalLength",
    "NormalLength",
    "OpenLoopWorkload",
    "PrefixAssignment",
    "PrefixCacheEstimate",
    "PrefixTraffic",
    "SessionMeans",
    "SessionTraffic",
    "SessionWorkload",
    "ThinkProcess",
    "Trace",
    "TraceError",
    "TraceFormat",
    "UniformLength",
    "Workload",
    "arrival_times_s",
    "assign_prefixes",
    "che_lru_hit_probability",
    "check_trace",
    "closed_loop_workload",
    "open_loop_workload",
    "parse_trace",
    "prefix_hit_tokens",
    "session_means",
    "session_workload",
    "steady_state_hits",
    "trace_format_of",
    "trace_workload",
    "unit_rate_arrival_times",
    "with_prefixes",
]
