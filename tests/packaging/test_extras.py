"""Each install set runs its commands: ``servesize[agent]`` runs ``servesize-agent`` and the base
install runs the offline ``servesize`` commands, with every package that only the other extras
bring made unimportable."""

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
from packaging.utils import NormalizedName, canonicalize_name

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "agent" / "fixtures"
EXTRAS = ("server", "postgres", "hub", "agent", "cuda")

# Runs a command line (argv[2], "module:function") with a finder in front of sys.meta_path that
# refuses the modules named in argv[1] (comma-separated top-level names), as if their
# distributions were not installed, then checks that none of them was imported.
BLOCKED_RUN = """
import importlib
import sys
from importlib.abc import MetaPathFinder

blocked = set(sys.argv[1].split(","))

class Absent(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
module, _, function = sys.argv[2].partition(":")
sys.argv = [module, *sys.argv[3:]]
try:
    getattr(importlib.import_module(module), function)()
finally:
    leaked = sorted({m.partition(".")[0] for m in sys.modules} & blocked)
    assert not leaked, leaked
"""


def _names(requirements: list[str]) -> set[NormalizedName]:
    return {canonicalize_name(Requirement(line).name) for line in requirements}


def _modules_only_in_other_extras(*installed: str) -> set[str]:
    """Top-level import names of the distributions that the extras other than ``installed``
    require directly and that neither the base nor ``installed`` requires."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    allowed = _names(project["dependencies"]).union(*(_names(extras[e]) for e in installed))
    excluded = set().union(*(_names(extras[e]) for e in EXTRAS if e not in installed)) - allowed
    modules = {
        module
        for module, distributions in packages_distributions().items()
        if {canonicalize_name(d) for d in distributions} & excluded
    }
    # cuda's packages are not installed here; named so the check does not depend on that.
    return modules | {"torch", "pynvml"}


def _run(
    tmp_path: Path, entry_point: str, installed: tuple[str, ...], *args: str
) -> subprocess.CompletedProcess[str]:
    blocked = _modules_only_in_other_extras(*installed)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env |= {"PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, ",".join(sorted(blocked)), entry_point, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _run_agent(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(tmp_path, "servesize.agent.cli:main", ("agent",), *args)


def test_the_blocked_sets_hold_the_server_stack() -> None:
    for installed in [(), ("agent",)]:
        assert {"fastapi", "sqlalchemy", "alembic", "uvicorn", "psycopg", "huggingface_hub"} <= (
            _modules_only_in_other_extras(*installed)
        )
    assert "httpx2" in _modules_only_in_other_extras()
    assert "httpx2" not in _modules_only_in_other_extras("agent")


def test_the_blocker_refuses_a_server_import(tmp_path: Path) -> None:
    """The check can fail: the API's app factory under the agent's blocker does."""
    result = _run(tmp_path, "servesize.api.app:create_app", ("agent",))
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


@pytest.mark.parametrize(
    "args",
    [
        ["models", "list"],
        ["models", "list", "--json"],
        ["memory", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--json"],
        # --json renders through the API's renderers, which must not need the server stack.
        ["perf", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--json"],
        [
            *("simulate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm"),
            *("--rate", "1", "--num-requests", "10", "--output-tokens", "4", "--json"),
        ],
        [
            *("size", "--model", "meta-llama/Llama-3.1-8B", "--rate", "1", "--gpu", "h100-sxm"),
            *("--slo", "ttft_p95=2s", "--tp", "1", "--verify-top", "0", "--json"),
        ],
    ],
)
def test_offline_commands_run_on_the_base_install(tmp_path: Path, args: list[str]) -> None:
    result = _run(tmp_path, "servesize.cli:main", (), *args)
    assert result.returncode == 0, result.stderr
    assert "Llama-3.1-8B" in result.stdout
