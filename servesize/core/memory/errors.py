"""The error raised when a deployment cannot be planned as written."""

from __future__ import annotations

from collections.abc import Sequence

from servesize.core.errors import FieldIssue, PlanningError

__all__ = ["InvalidDeploymentError"]


class InvalidDeploymentError(PlanningError, ValueError):
    """The deployment asks for something the engine would refuse (or that has no meaning).

    ``issues`` point into the request with JSON pointers (``/deployment/tensor_parallel_size``,
    ``/hardware/memory_bytes``), so the API can answer with a precise 422.
    """

    def __init__(self, issues: Sequence[FieldIssue]) -> None:
        if not issues:
            raise ValueError("InvalidDeploymentError needs at least one issue")
        super().__init__("; ".join(f"{i.field}: {i.problem}" for i in issues))
        self.issues = tuple(issues)
