"""The shape of the code base: small modules, thin route handlers.

Every module of the package stays under 600 lines, and every HTTP route handler under 40 lines
(parse, call one core function, render), so that no planner or model can hide in a route.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "servesize"
MAX_MODULE_LINES = 600
MAX_HANDLER_LINES = 40
HTTP_VERBS = frozenset({"get", "post", "put", "patch", "delete", "head", "options"})

MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)
ROUTES = sorted((PACKAGE / "api" / "routes").glob("*.py"))


def _handlers(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions decorated with ``@router.<verb>(...)``."""
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(call, ast.Attribute) and call.attr in HTTP_VERBS:
                found.append(node)
                break
    return found


def test_the_package_has_modules_and_routes() -> None:
    assert len(MODULES) > 50
    assert len(ROUTES) > 5


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_is_under_600_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines < MAX_MODULE_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines"


@pytest.mark.parametrize("path", ROUTES, ids=lambda p: p.name)
def test_every_route_handler_is_under_40_lines(path: Path) -> None:
    long = {
        h.name: (h.end_lineno or h.lineno) - h.lineno + 1
        for h in _handlers(ast.parse(path.read_text()))
        if (h.end_lineno or h.lineno) - h.lineno + 1 >= MAX_HANDLER_LINES
    }
    assert not long, f"{path.name}: {long}"


def test_the_handler_finder_sees_decorated_routes() -> None:
    source = (
        "@router.post('/x')\ndef a() -> None:\n    pass\n\n"
        "@router.get\nasync def b() -> None:\n    pass\n\n"
        "def c() -> None:\n    pass\n"
    )
    assert [h.name for h in _handlers(ast.parse(source))] == ["a", "b"]
