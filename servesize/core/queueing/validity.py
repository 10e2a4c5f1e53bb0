"""What a queueing result may be trusted for: the model, its assumptions and its limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PercentileSupport = Literal["exact", "approximate", "unavailable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelValidity:
    """The assumptions behind a queueing result and how far its numbers can be trusted.

    Attributes
    ----------
    model : str
        The model in Kendall notation (``"M/M/c"``, ``"M/G/1"``, ``"G/G/c"``) or its name.
    method : str
        The formula used, e.g. ``"Erlang C via the Erlang-B recurrence"``.
    exact : bool
        True when the mean figures are exact under ``assumptions``; False for approximations.
    percentiles : {"exact", "approximate", "unavailable"}
        What the result's percentile helpers return, if it has any.
    assumptions : tuple of str
        Conditions under which the figures hold, in plain words.
    caveats : tuple of str
        Warnings specific to these inputs (say, a utilisation where an approximation is weak).
    """

    model: str
    method: str
    exact: bool
    percentiles: PercentileSupport
    assumptions: tuple[str, ...]
    caveats: tuple[str, ...] = ()
