"""``servesize[agent]`` is enough for ``servesize-agent``: it runs with every package that only the
``server``, ``postgres``, ``hub`` and ``cuda`` extras bring made unimportable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "agent" / "fixtures"

# Runs the agent's command line with a finder in front of sys.meta_path that refuses the modules
# named in argv[1] (comma-separated top-level names), as if their distributions were not installed.
BLOCKED_RUN = """
import sys
from importlib.abc import MetaPathFinder

blocked = set(sys.argv[1].split(","))

class Absent(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
sys.argv = ["servesize-agent", *sys.argv[2:]]
from servesize.agent.cli import main

try:
    main()
finally:
    leaked = sorted({m.partition(".")[0] for m in sys.modules} & blocked)
    assert not leaked, leaked
"""


def _extra_only_modules() -> set[str]:
    """Top-level import names of the installed distributions that the server, postgres, hub and
    cuda extras require directly and that neither the base nor the agent extra requires."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]

    def names(requirements: list[str]) -> set[str]:
        return {canonicalize_name(Requirement(line).name) for line in requirements}

    allowed = names(project["dependencies"]) | names(extras["agent"])
    others = names([r for extra in ("server", "postgres", "hub", "cuda") for r in extras[extra]])
    excluded = others - allowed
    modules = {
        module
        for module, distributions in packages_distributions().items()
        if {canonicalize_name(d) for d in distributions} & excluded
    }
    # Not installed here (no GPU), unimportable anyway; named so the check does not depend on it.
    return modules | {"torch", "pynvml"}


def _run_agent(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    blocked = _extra_only_modules()
    assert {"fastapi", "sqlalchemy", "alembic", "uvicorn", "psycopg", "huggingface_hub"} <= blocked
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env |= {"PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, ",".join(sorted(blocked)), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_blocker_refuses_a_server_import(tmp_path: Path) -> None:
    """The check can fail: importing the API under the same blocker does."""
    probe = BLOCKED_RUN.replace("from servesize.agent.cli import main", "import servesize.api.app")
    result = subprocess.run(
        [sys.executable, "-c", probe, ",".join(sorted(_extra_only_modules()))],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode != 0
    assert "ModuleNotFoundError" in result.stderr


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_agent_starts_without_the_server_stack(tmp_path: Path, args: list[str]) -> None:
    result = _run_agent(tmp_path, *args)
    assert result.returncode == 0, result.stderr


def test_agent_bench_on_cpu_without_the_server_stack(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = _run_agent(tmp_path, "bench", "--device", "cpu", "--quick", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["payload"]["gemm"]


def test_agent_ingest_without_the_server_stack(tmp_path: Path) -> None:
    out = tmp_path / "ingested.json"
    fixture = FIXTURES / "vllm_bench_rates.jsonl"
    args = ["ingest", str(fixture), "--format", "vllm-bench", "--out", str(out)]
    result = _run_agent(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["payload"]["endpoint_benchmarks"]
