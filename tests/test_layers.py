"""The layers import only downward, and the package root loads nothing it does not need.

Each check runs in a fresh interpreter, so what one test imported cannot
hide what another loads.  Layers, lowest first: base < traces < graph <
operators < workers < the API (collection, dataflow) < plan < sql < streaming.
"""
from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Source folder of each ddflow package (traces/ and streaming/ install under ddflow).
FOLDERS = {"ddflow": ROOT / "ddflow", "ddflow.traces": ROOT / "traces", "ddflow.streaming": ROOT / "streaming"}

LAYERS = ["ddflow.base", "ddflow.traces", "ddflow.graph", "ddflow.operators", "ddflow.workers", "ddflow.api",
          "ddflow.plan", "ddflow.sql", "ddflow.streaming"]


def layer_of(module: str) -> int | None:
    if module in ("ddflow.collection", "ddflow.dataflow"):
        return LAYERS.index("ddflow.api")
    for i, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            return i
    return None  # ddflow, ddflow.errors: below every layer


def loaded_after(statement: str) -> list[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("layer", [x for x in LAYERS if x not in ("ddflow.api", "ddflow.streaming")]
                         + ["ddflow.collection", "ddflow.dataflow"])
def test_a_layer_loads_nothing_above_it(layer):
    mine = layer_of(layer)
    above = [m for m in loaded_after(f"import {layer}") if m.startswith("ddflow.") and (layer_of(m) or 0) > mine]
    assert not above, f"import {layer} loads higher layers: {above}"


def test_the_package_root_is_lazy():
    mods = loaded_after("import ddflow")
    assert [m for m in mods if m.startswith("ddflow.")] == [], "import ddflow should load no submodule"
    heavy = loaded_after("import ddflow; ddflow.Dataflow")
    for name in ("pyspark", "confluent_kafka", "numba", "ddflow.streaming", "ddflow.workers.pool"):
        assert name not in heavy, f"using ddflow.Dataflow loaded {name}"


def test_public_names_resolve_and_are_listed():
    import ddflow

    for name in ddflow.__all__:
        assert getattr(ddflow, name) is not None
    with pytest.raises(AttributeError):
        ddflow.no_such_name  # noqa: B018


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for pkg, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if pkg == "ddflow" and parts and parts[0] in ("traces", "streaming"):
                continue
            mods[".".join([pkg, *parts])] = path
    return mods


def _module_level_imports(path: pathlib.Path, module: str) -> set[str]:
    """ddflow modules imported when ``module`` is imported (not inside functions or TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    found = set()
    is_pkg = path.name == "__init__.py"
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ([node] if not isinstance(node, (ast.If, ast.Try)) else ast.walk(node)):
            if isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names if a.name.startswith("ddflow")}
            elif isinstance(sub, ast.ImportFrom):
                if sub.level:
                    base = module.split(".") if is_pkg else module.split(".")[:-1]
                    base = base[: len(base) - (sub.level - 1)]
                    target = ".".join(base + ([sub.module] if sub.module else []))
                else:
                    target = sub.module or ""
                if target.startswith("ddflow"):
                    found.add(target)
    return found


def test_no_import_points_up_and_no_cycles():
    mods = _modules()
    graph = {m: {t for t in _module_level_imports(p, m) if t in mods} for m, p in mods.items()}
    upward = [(m, t) for m, ts in graph.items() for t in ts
              if layer_of(m) is not None and layer_of(t) is not None and layer_of(t) > layer_of(m)]
    assert not upward, f"imports pointing up a layer: {upward}"
    # Cycles: depth-first search over module-level imports (a package importing its own modules is fine).
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(m: str, stack: list[str]) -> bool:
        state[m] = 1
        for t in graph[m]:
            if m.startswith(t + "."):
                continue  # a module importing its own package's __init__
            if state.get(t) == 1:
                cycle.extend(stack[stack.index(t):] + [t] if t in stack else [m, t])
                return True
            if t not in state and visit(t, stack + [t]):
                return True
        state[m] = 2
        return False

    for m in graph:
        if m not in state and visit(m, [m]):
            break
    assert not cycle, f"module-level import cycle: {' -> '.join(cycle)}"


def test_no_module_over_600_lines_without_a_reason():
    long = []
    for m, p in _modules().items():
        text = p.read_text()
        if text.count("\n") > 600 and "Why this module is long" not in text[:3000]:
            long.append((m, text.count("\n")))
    assert not long, f"modules over 600 lines with no reason at their top: {long}"
