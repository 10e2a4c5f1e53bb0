"""Launch commands as the API returns them (a sizing plan's, and ``POST /v1/memory``'s for
one deployment)."""

from __future__ import annotations

from pydantic import Field

from servesize.schemas.base import ResponseModel

__all__ = ["LaunchCommandOut", "LaunchFileOut", "LaunchOut"]


class LaunchFileOut(ResponseModel):
    path: str
    content: str


class LaunchCommandOut(ResponseModel):
    role: str
    """``server``, ``node<k>`` (one command per node), ``prefill``, ``decode``, ``router``."""
    argv: list[str]
    command: str
    """``argv`` quoted for a POSIX shell."""
    files: list[LaunchFileOut] = Field(default_factory=list)
    """Files the command reads (TensorRT-LLM's ``--extra_llm_api_options`` YAML)."""


class LaunchOut(ResponseModel):
    """How to start one replica (each pool's replica for P/D) of the plan's engine."""

    engine: str
    engine_version: str
    """The release whose option table the commands are written and checked against."""
    commands: list[LaunchCommandOut]
    placeholders: dict[str, str]
    """``$MASTER_ADDR`` and the like: what to substitute before running."""
    notes: list[str]
