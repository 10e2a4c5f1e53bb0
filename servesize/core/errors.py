"""Domain errors raised by the planning core.

PlanningError                  expected, explainable outcome (never a bug)
 ├─ InvalidArchitectureError   a config.json lacks fields the math needs, or they disagree
 ├─ InsufficientMemoryError    the weights (or the runtime) do not fit on the GPU(s)
 ├─ UnsupportedDeploymentError  valid as written, but the step-time model cannot run it there
 └─ UnstableQueueError         offered load >= capacity (rho >= 1); no steady state

They carry no HTTP status: ``servesize.api.errors`` maps them to responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _rebuilt(cls: type[PlanningError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """An error rebuilt from its message and attributes, without its constructor."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class PlanningError(Exception):
    """Base class for expected, explainable planning outcomes (not bugs).

    Pickles by its message and attributes (not its constructor's arguments), so a subclass
    with a constructor of its own crosses a process boundary (a sizing's tasks) intact."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


@dataclass(frozen=True, slots=True)
class FieldIssue:
    """One problem with one input field.

    ``field`` is a JSON pointer into the offending document (``/num_key_value_heads``,
    ``/text_config/head_dim``); ``problem`` says what is wrong in plain words.
    """

    field: str
    problem: str


class InvalidArchitectureError(PlanningError, ValueError):
    """A model config cannot be planned: fields are missing, malformed or inconsistent."""

    def __init__(self, model: str, issues: list[FieldIssue]) -> None:
        if not issues:
            raise ValueError("InvalidArchitectureError needs at least one issue")
        listed = "; ".join(f"{i.field}: {i.problem}" for i in issues)
        super().__init__(f"{model}: {listed}")
        self.model = model
        self.issues = tuple(issues)


class InsufficientMemoryError(PlanningError):
    """The deployment does not fit in the memory available."""


class UnsupportedDeploymentError(PlanningError, ValueError):
    """A deployment that is valid as written but that the step-time model cannot run on this
    hardware (e.g. a GPU with no 16- or 32-bit dense peak for the operators to fall back to).

    Sizing turns it into an ``unsupported`` rejection of the candidate; any other error a
    builder raises is a bug and propagates.
    """


class UnstableQueueError(PlanningError, ValueError):
    """Arrival rate meets or exceeds service capacity."""

    def __init__(self, utilization: float) -> None:
        super().__init__(f"utilization {utilization:.3f} >= 1: the queue grows without bound")
        self.utilization = utilization
