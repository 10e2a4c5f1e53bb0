"""Regenerate the engines' option tables under ``servesize/data/engine_options/``.

The tables are read from the engines' own sources, statically (no engine is imported: vLLM,
SGLang and TensorRT-LLM need torch and a GPU stack), so the launch commands a sizing prints can
be parsed by an ``argparse`` parser with the engine's flags, types, choices and ``nargs``
(``tests/core/sizing/test_engine_commands.py``).

- **vLLM** (a wheel from PyPI): every ``add_argument`` in ``EngineArgs.add_cli_args`` and
  ``AsyncEngineArgs.add_cli_args`` (``vllm/engine/arg_utils.py``) and the server's own
  (``vllm/entrypoints/openai/cli_args.py``). An argument spread from ``get_kwargs(SomeConfig)``
  takes its kind from the config dataclass field's annotation, as ``_compute_kwargs`` does:
  a dataclass or dict is JSON, ``bool`` is ``BooleanOptionalAction`` (``--x`` / ``--no-x``), a
  ``Literal`` gives choices, ``list[int]`` is ``nargs="+"``, else ``int`` / ``float`` / ``str``.
- **SGLang** (a wheel from PyPI): every ``parser.add_argument`` in ``ServerArgs.add_cli_args``
  (``python/sglang/srt/server_args.py``), with its ``type``, ``choices``, ``action`` and
  ``nargs``.
- **sglang_router** (a wheel from PyPI): ``RouterArgs.add_cli_args`` of
  ``sglang_router/launch_router.py`` (``python -m sglang_router.launch_router``).
- **TensorRT-LLM** (its source tree; the wheels are published on NVIDIA's index only): the
  ``click.option``s of ``trtllm-serve`` (``tensorrt_llm/commands/serve.py``) and the fields of
  the pydantic classes the ``--extra_llm_api_options`` YAML may set
  (``tensorrt_llm/llmapi/llm_args.py``).

Usage::

    pip download --no-deps -d /tmp/w vllm==0.21.0 sglang==0.5.1   # one package per call
    python -m bench.engine_options vllm /tmp/w/vllm-0.21.0-*.whl --version 0.21.0
    python -m bench.engine_options sglang /tmp/w/sglang-0.5.1-py3-none-any.whl --version 0.5.1
    python -m bench.engine_options sglang-router /tmp/w/sglang_router-0.1.9-*.whl --version 0.1.9
    python -m bench.engine_options trtllm /path/to/TensorRT-LLM --version 1.0.0 \\
        --source-url https://github.com/NVIDIA/TensorRT-LLM/tree/v1.0.0

``SOURCE_DATE_EPOCH`` pins the extraction date.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parents[1] / "servesize" / "data" / "engine_options"
Option = dict[str, Any]


class Sources:
    """Python files of a wheel or a source tree, by their path inside the package."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._zip = zipfile.ZipFile(path) if path.is_file() else None

    def read(self, name: str) -> str | None:
        if self._zip is not None:
            try:
                return self._zip.read(name).decode()
            except KeyError:
                return None
        for root in (self.path, self.path / "python"):
            if (root / name).is_file():
                return (root / name).read_text()
        return None

    def names(self, prefix: str) -> list[str]:
        if self._zip is not None:
            return [n for n in self._zip.namelist() if n.startswith(prefix) and n.endswith(".py")]
        for root in (self.path, self.path / "python"):
            base = root / prefix
            if base.is_dir():
                return sorted(str(p.relative_to(root)) for p in base.rglob("*.py"))
        return []

    def digest(self) -> str | None:
        if self._zip is None:
            return None
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def _const(node: ast.AST | None) -> Any:
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, SyntaxError, TypeError):
        return None


def _calls(tree: ast.AST, attr: str) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == attr
        ):
            yield node


def _functions(tree: ast.Module, name: str) -> Iterator[ast.FunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            yield node


# --- annotation → argparse kind (vLLM's _compute_kwargs) -------------------------------


class Annotations:
    """Module-level type aliases and class field annotations of a set of modules."""

    def __init__(self, sources: Sources, prefixes: tuple[str, ...]) -> None:
        self.aliases: dict[str, ast.expr] = {}
        self.classes: dict[str, dict[str, ast.expr]] = {}
        self.bases: dict[str, list[str]] = {}
        self.dataclasses: set[str] = set()
        for prefix in prefixes:
            for name in sources.names(prefix):
                text = sources.read(name)
                if text is None:
                    continue
                self._scan(ast.parse(text))

    def _scan(self, tree: ast.Module) -> None:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    self.aliases.setdefault(target.id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if node.value is not None and _name(node.annotation) == "TypeAlias":
                    self.aliases.setdefault(node.target.id, node.value)
            elif isinstance(node, ast.ClassDef):
                fields = self.classes.setdefault(node.name, {})
                self.bases.setdefault(node.name, [b for b in map(_name, node.bases) if b])
                decorators = {_name(d) for d in node.decorator_list}
                if decorators & {"dataclass", "config"} or any(
                    isinstance(d, ast.Call) and _name(d.func) in ("dataclass", "config")
                    for d in node.decorator_list
                ):
                    self.dataclasses.add(node.name)
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        fields.setdefault(item.target.id, item.annotation)

    def field(self, cls: str, name: str) -> ast.expr | None:
        seen: set[str] = set()
        todo = [cls]
        while todo:
            c = todo.pop(0)
            if c in seen:
                continue
            seen.add(c)
            if name in self.classes.get(c, {}):
                return self.classes[c][name]
            todo += self.bases.get(c, [])
        return None

    def atoms(self, node: ast.expr | None, depth: int = 0) -> list[Any]:
        """The union members of an annotation, aliases expanded: type names (``"int"``),
        ``("Literal", values)`` and ``("list", element atoms)``."""
        if node is None or depth > 12:
            return ["str"]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.atoms(ast.parse(node.value, mode="eval").body, depth + 1)
            except SyntaxError:
                return ["str"]
        if isinstance(node, ast.Constant) and node.value is None:
            return ["None"]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self.atoms(node.left, depth + 1) + self.atoms(node.right, depth + 1)
        if isinstance(node, ast.Subscript):
            head = _name(node.value)
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head in ("Optional",):
                return [*self.atoms(args[0], depth + 1), "None"]
            if head == "Union":
                return [a for arg in args for a in self.atoms(arg, depth + 1)]
            if head == "Literal":
                return [("Literal", [_const(a) for a in args])]
            if head in ("Annotated", "SkipValidation", "ClassVar", "InitVar"):
                return self.atoms(args[0], depth + 1)
            if head in ("list", "List", "tuple", "Tuple", "set", "Set", "Sequence"):
                return [("list", self.atoms(args[0], depth + 1))]
            if head in ("dict", "Dict", "Mapping"):
                return ["dict"]
            if head in ("type", "Type", "Callable"):
                return ["object"]
            return self.atoms(node.value, depth + 1)
        name = _name(node)
        if name in ("int", "float", "str", "bool", "dict", "None"):
            return [name]
        if name in ("list", "tuple", "set"):
            return [("list", ["str"])]
        if name in self.aliases:
            return self.atoms(self.aliases[name], depth + 1)
        if name in self.dataclasses:
            return ["dataclass"]
        return ["object"]


def _name(node: ast.AST | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name(node.func)
    return ""


def _kind_from_annotation(ann: Annotations, cls: str, field: str) -> Option:
    """vLLM ``_compute_kwargs`` for one field (vllm/engine/arg_utils.py)."""
    atoms = ann.atoms(ann.field(cls, field))
    names = {a for a in atoms if isinstance(a, str)}
    literals = [v for a in atoms if isinstance(a, tuple) and a[0] == "Literal" for v in a[1]]
    lists = [a[1] for a in atoms if isinstance(a, tuple) and a[0] == "list"]
    optional = "None" in names
    if "dataclass" in names:
        return {"kind": "json"}
    if names - {"None"} == {"bool", "str"}:
        return {"kind": "str", "nargs": "?", "const": True}
    if "bool" in names:
        return {"kind": "bool_optional"}
    if literals:
        choices = [str(v) for v in literals]
        if optional:
            choices.append("None")
        return {"kind": "str" if "str" in names else "choice", "choices": choices}
    if lists:
        element = lists[0]
        element_names = {e for e in element if isinstance(e, str)}
        element_literals = [
            v for e in element if isinstance(e, tuple) and e[0] == "Literal" for v in e[1]
        ]
        out: Option = {"nargs": "+"}
        if element_literals:
            out |= {"kind": "choice", "choices": [str(v) for v in element_literals]}
        elif "int" in element_names:
            out["kind"] = "int"
        elif "float" in element_names:
            out["kind"] = "float"
        else:
            out["kind"] = "str"
        return out
    if "int" in names:
        return {"kind": "int"}
    if "float" in names:
        return {"kind": "float"}
    if "dict" in names:
        return {"kind": "json"}
    return {"kind": "str"}


_EXPLICIT_TYPES = {"int": "int", "float": "float", "str": "str"}


def _explicit(call: ast.Call) -> Option:
    """What an ``add_argument`` call states itself: type, choices, action, nargs."""
    out: Option = {}
    for kw in call.keywords:
        if kw.arg == "type":
            name = _name(kw.value)
            out["kind"] = _EXPLICIT_TYPES.get(name, "json" if "json" in name else "str")
        elif kw.arg == "choices":
            values = _const(kw.value)
            if isinstance(values, list | tuple | set):
                out["choices"] = sorted(str(v) for v in values)
            else:
                out["choices_dynamic"] = True
        elif kw.arg == "action":
            action = _const(kw.value) or _name(kw.value)
            out["action"] = str(action)
        elif kw.arg == "nargs":
            out["nargs"] = _const(kw.value)
        elif kw.arg == "const":
            out["const"] = _const(kw.value)
    action = out.pop("action", None)
    if action in ("store_true", "store_false"):
        out["kind"] = action
    elif action == "BooleanOptionalAction":
        out["kind"] = "bool_optional"
    elif action == "append":
        out["append"] = True
    elif action is not None and action not in ("store",):
        out.setdefault("kind", "str")
        out["action"] = action
    if "choices" in out and "kind" not in out:
        out["kind"] = "choice"
    return out


def _flags(call: ast.Call) -> list[str]:
    """String arguments; in an f-string flag (``f"--{prefix}policy"``) the substitutions are
    taken as empty (sglang_router's ``use_router_prefix=False``)."""
    out = []
    for a in call.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            out.append(a.value)
        elif isinstance(a, ast.JoinedStr):
            out.append(
                "".join(
                    v.value
                    for v in a.values
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)
                )
            )
    return out


def _kwargs_sources(func: ast.FunctionDef) -> dict[str, str]:
    """``x_kwargs = get_kwargs(SomeConfig)`` → ``{"x_kwargs": "SomeConfig"}``."""
    out: dict[str, str] = {}
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and _name(node.value.func) == "get_kwargs"
            and node.value.args
        ):
            out[node.targets[0].id] = _name(node.value.args[0])
    return out


def _spread(call: ast.Call) -> tuple[str, str] | None:
    """``**x_kwargs["field"]`` (also inside ``**{**x_kwargs["field"], ...}``)."""
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        value = kw.value
        if isinstance(value, ast.Dict):
            inner = [v for k, v in zip(value.keys, value.values, strict=True) if k is None]
            value = inner[0] if inner else value
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            key = _const(value.slice)
            if isinstance(key, str):
                return value.value.id, key
    return None


def _argparse_options(funcs: list[ast.FunctionDef], ann: Annotations | None) -> dict[str, Option]:
    """``{first flag: option}``; positionals under ``"<name>"`` keys with ``positional``."""
    options: dict[str, Option] = {}
    for func in funcs:
        sources = _kwargs_sources(func)
        for call in _calls(func, "add_argument"):
            # A flag built wholly from a substitution (a loop over fields) reads as "--".
            flags = [f for f in _flags(call) if f.startswith("-") and f.strip("-")]
            names = _flags(call)
            if not flags and len(names) == 1 and not names[0].startswith("-"):
                options[f"<{names[0]}>"] = _explicit(call) | {"positional": names[0]}
                continue
            if not flags:
                continue
            option: Option = {}
            spread = _spread(call)
            if spread is not None and ann is not None and spread[0] in sources:
                option = _kind_from_annotation(ann, sources[spread[0]], spread[1])
                option["field"] = f"{sources[spread[0]]}.{spread[1]}"
            option |= _explicit(call)
            option.setdefault("kind", "str")
            option["flags"] = flags
            options[flags[0]] = option
    return options


def extract_vllm(sources: Sources) -> dict[str, Option]:
    ann = Annotations(sources, ("vllm/config/", "vllm/engine/", "vllm/entrypoints/openai/"))
    funcs: list[ast.FunctionDef] = []
    for name, func_names in (
        ("vllm/engine/arg_utils.py", ("add_cli_args",)),
        ("vllm/entrypoints/openai/cli_args.py", ("make_arg_parser", "add_cli_args")),
        ("vllm/entrypoints/cli/serve.py", ("subparser_init",)),
    ):
        text = sources.read(name)
        if text is None:
            continue
        tree = ast.parse(text)
        for f in func_names:
            funcs += list(_functions(tree, f))
    options = _argparse_options(funcs, ann)
    # FrontendArgs.add_cli_args registers one ``--field-name`` per field (cli_args.py).
    for cls in ("BaseFrontendArgs", "FrontendArgs"):
        for field in ann.classes.get(cls, {}):
            flag = "--" + field.replace("_", "-")
            option = _kind_from_annotation(ann, cls, field)
            options.setdefault(flag, option | {"field": f"{cls}.{field}", "flags": [flag]})
    return options


def extract_sglang(sources: Sources, name: str = "sglang/srt/server_args.py") -> dict[str, Option]:
    text = sources.read(name)
    if text is None:
        raise SystemExit(f"{name} not found")
    tree = ast.parse(text)
    return _argparse_options(list(_functions(tree, "add_cli_args")), None)


_TRT_CLASSES = (
    "TorchLlmArgs",
    "BaseLlmArgs",
    "KvCacheConfig",
    "SchedulerConfig",
    "CudaGraphConfig",
    "DynamicBatchConfig",
    "MoeConfig",
    "AttentionDpConfig",
    "DecodingBaseConfig",
    "EagleDecodingConfig",
    "MTPDecodingConfig",
    "NGramDecodingConfig",
    "DraftTargetDecodingConfig",
)


def extract_trtllm(sources: Sources) -> tuple[dict[str, Option], dict[str, dict[str, Any]]]:
    serve = sources.read("tensorrt_llm/commands/serve.py")
    args = sources.read("tensorrt_llm/llmapi/llm_args.py")
    if serve is None or args is None:
        raise SystemExit("tensorrt_llm/commands/serve.py or llmapi/llm_args.py not found")
    options: dict[str, Option] = {}
    tree = ast.parse(serve)
    for func in _functions(tree, "serve"):
        for deco in func.decorator_list:
            if not (isinstance(deco, ast.Call) and _name(deco.func) == "option"):
                continue
            flags = [f for f in _flags(deco) if f.startswith("-")]
            option: Option = {"kind": "str"}
            dests = [f for f in _flags(deco) if not f.startswith("-")]
            if dests:
                option["dest"] = dests[0]
            for kw in deco.keywords:
                if kw.arg == "type":
                    name = _name(kw.value)
                    if name in _EXPLICIT_TYPES:
                        option["kind"] = _EXPLICIT_TYPES[name]
                    elif name in ("Choice", "ChoiceWithAlias") and isinstance(kw.value, ast.Call):
                        values = _const(kw.value.args[0]) if kw.value.args else None
                        if isinstance(values, list | tuple):
                            option |= {"kind": "choice", "choices": [str(v) for v in values]}
                elif kw.arg == "is_flag" and _const(kw.value):
                    option["kind"] = "store_true"
            option["flags"] = flags
            options[flags[0]] = option
        for deco in func.decorator_list:
            if isinstance(deco, ast.Call) and _name(deco.func) == "argument":
                names = _flags(deco)
                if names:
                    options[f"<{names[0]}>"] = {"kind": "str", "positional": names[0]}
    ann = Annotations.__new__(Annotations)
    ann.aliases, ann.classes, ann.bases, ann.dataclasses = {}, {}, {}, set()
    ann._scan(ast.parse(args))
    classes: dict[str, dict[str, Any]] = {}
    for cls in _TRT_CLASSES:
        if cls not in ann.classes:
            continue
        fields: dict[str, str] = {}
        chain = [cls]
        while chain:
            c = chain.pop(0)
            for field, node in ann.classes.get(c, {}).items():
                fields.setdefault(field, ast.unparse(node))
            chain += [b for b in ann.bases.get(c, []) if b in ann.classes]
        classes[cls] = {"fields": dict(sorted(fields.items()))}
    return options, classes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=["vllm", "sglang", "sglang-router", "trtllm"])
    parser.add_argument("source", type=Path, help="a wheel, or the root of a source tree")
    parser.add_argument("--version", required=True)
    parser.add_argument("--source-url", default=None)
    parser.add_argument("--commit", default=None)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    a = parser.parse_args()
    sources = Sources(a.source)
    classes: dict[str, dict[str, Any]] = {}
    if a.engine == "vllm":
        options = extract_vllm(sources)
    elif a.engine == "sglang":
        options = extract_sglang(sources)
    elif a.engine == "sglang-router":
        options = extract_sglang(sources, "sglang_router/launch_router.py")
    else:
        options, classes = extract_trtllm(sources)
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch else dt.datetime.now(dt.UTC)
    url = a.source_url or (
        f"https://pypi.org/project/{a.engine}/{a.version}/" if a.engine != "trtllm" else None
    )
    document: dict[str, Any] = {
        "engine": a.engine,
        "version": a.version,
        "source": {
            "url": url,
            "file": a.source.name,
            "sha256": sources.digest(),
            "commit": a.commit,
        },
        "extracted": when.date().isoformat(),
        "extractor": "bench/engine_options.py",
        "options": dict(sorted(options.items())),
    }
    if classes:
        document["llm_args"] = classes
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"{a.engine}-{a.version}.json"
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
    print(f"{path}: {len(options)} options")


if __name__ == "__main__":
    main()
