"""Analytic queueing models: Little's law, M/M/c (Erlang C), M/G/1 (Pollaczek–Khinchine), G/G/c.

Each model validates its inputs (``ValueError`` naming the bad value), raises
``UnstableQueueError`` when utilisation reaches 1, and returns a frozen result that states the
utilisation and a :class:`ModelValidity` (exact or approximate, and under which assumptions).

=================================  ====================================================
``littles_law``                    ``L = λW`` solved for whichever quantity is missing
``erlang_b``, ``erlang_c``         loss and waiting probabilities, stable for large ``c``
``mmc``                            exact M/M/c means, tails and percentiles
``mg1``                            Pollaczek–Khinchine means, approximate wait percentiles
``kingman``, ``allen_cunneen``     G/G/1 and G/G/c mean-wait approximations
``ggc``                            Kingman for ``c = 1``, Allen–Cunneen above
=================================  ====================================================
"""

from servesize.core.queueing.little import LittleQuantity, LittlesLawResult, littles_law
from servesize.core.queueing.queue_ggc import GGcResult, allen_cunneen, ggc, kingman
from servesize.core.queueing.queue_mg1 import MG1Result, mg1, service_scv_from_second_moment
from servesize.core.queueing.queue_mmc import MMcResult, erlang_b, erlang_c, mmc
from servesize.core.queueing.validity import ModelValidity, PercentileSupport

__all__ = [
    "GGcResult",
    "LittleQuantity",
    "LittlesLawResult",
    "MG1Result",
    "MMcResult",
    "ModelValidity",
    "PercentileSupport",
    "allen_cunneen",
    "erlang_b",
    "erlang_c",
    "ggc",
    "kingman",
    "littles_law",
    "mg1",
    "mmc",
    "service_scv_from_second_moment",
]
