"""The layers import only downward, inside functions too, and the package root loads nothing it does not need.

Each loading check runs in a fresh interpreter, so what one test imported
cannot hide what another loads.  Layers, lowest first: base < traces <
graph < operators < workers < the engine's API (collection, dataflow) <
plan < the front ends (sql, datalog) < the facade (the user's Dataflow) <
streaming.  The import check reads every import a module can make:
module level, inside functions, ``importlib.import_module("...")`` with a
literal name, and the package root's lazy names (``import ddflow`` then
``ddflow.Dataflow``).  ``if TYPE_CHECKING:`` blocks are left out: they
only name the type of what a lower layer is handed (an ``Arrangement``
holds its ``Collection``) and never load anything.
"""
from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: Source folder of each ddflow package (traces/, streaming/ and pipelines/ install under ddflow).
FOLDERS = {"ddflow": ROOT / "ddflow", "ddflow.traces": ROOT / "traces", "ddflow.streaming": ROOT / "streaming",
           "ddflow.pipelines": ROOT / "pipelines"}

#: Lowest first; a module of one layer may import its own layer and those before it.
LAYERS = [["ddflow.base"], ["ddflow.traces"], ["ddflow.graph"], ["ddflow.operators"], ["ddflow.workers"],
          ["ddflow.collection", "ddflow.dataflow"], ["ddflow.plan"], ["ddflow.sql", "ddflow.datalog"],
          ["ddflow.facade"], ["ddflow.streaming", "ddflow.pipelines", "ddflow.top"]]


def layer_of(module: str) -> int | None:
    for i, layer in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in layer):
            return i
    return None  # ddflow, ddflow.errors: below every layer


def loaded_after(statement: str) -> list[str]:
    code = f"import sys, json; {statement}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("layer", [p for layer in LAYERS[:-1] for p in layer])
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


@pytest.mark.parametrize("native", ["1", "0"])
def test_running_a_dataflow_never_loads_numba(native):
    """The kernels are native (or, under ``DDFLOW_NATIVE=0``, plain Python): a run that steps a join, a reduce and
    a loop imports no numba, installed or not."""
    run = ("import os; os.environ['DDFLOW_NATIVE'] = " + repr(native) + "; import ddflow; f = ddflow.Dataflow(); "
           "e_in, e = f.new_collection('e'); r = e.project(0, 0); "
           "o = r.iterate(lambda v: v.join(e).project(2, 1).concat(r).distinct()).capture(); "
           "e_in.update([(0, 1), (1, 2)], 0); f.advance_to(1); f.run(); "
           "assert sorted(o.drain()) == [((0, 0), 0, 1), ((1, 0), 0, 1), ((1, 1), 0, 1), ((2, 0), 0, 1), "
           "((2, 1), 0, 1)]")
    mods = loaded_after(run)
    assert "numba" not in mods and not any(m.startswith("numba.") for m in mods)
    assert ("ddflow._native" in mods) == (native == "1")


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
            if pkg == "ddflow" and parts and parts[0] in ("traces", "streaming", "pipelines"):
                continue
            mods[".".join([pkg, *parts])] = path
    return mods


def _target(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    """The module a ``from ... import`` names (relative ones resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _literal_name(arg: ast.expr, module: str) -> str | None:
    """The module name of ``importlib.import_module(arg)`` when it is a literal (``f"{__name__}.x"`` included)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr):
        parts = []
        for v in arg.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.value.id == "__name__":
                parts.append(module)
            else:
                return None
        return "".join(parts)
    return None


def _root_exports() -> dict[str, str]:
    """The package root's lazy names: ``ddflow.X`` loads ``_EXPORTS[X]``."""
    tree = ast.parse((FOLDERS["ddflow"] / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("ddflow/__init__.py has no _EXPORTS")


def _imports(path: pathlib.Path, module: str, everywhere: bool, mods: set[str] | None = None) -> set[str]:
    """ddflow modules ``module`` imports: at module level only, or (``everywhere``) anywhere at all.

    ``everywhere`` reads function bodies, ``importlib.import_module`` with
    a literal name, and ``ddflow.X`` for a module that imports the package
    root (the module ``X`` loads from); never ``TYPE_CHECKING`` blocks.
    ``from pkg import name`` counts ``pkg.name`` when that is a module.
    """
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    nodes = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if everywhere or isinstance(node, (ast.If, ast.Try)):
            nodes.extend(ast.walk(node))
        else:
            nodes.append(node)
    found: set[str] = set()
    imports_root = False
    for sub in nodes:
        if isinstance(sub, ast.Import):
            found |= {a.name for a in sub.names if a.name.startswith("ddflow")}
            imports_root |= any(a.name == "ddflow" and a.asname is None for a in sub.names)
        elif isinstance(sub, ast.ImportFrom):
            target = _target(sub, module, is_pkg)
            if target.startswith("ddflow"):
                found.add(target)
                for a in sub.names:
                    if mods is not None and f"{target}.{a.name}" in mods:
                        found.add(f"{target}.{a.name}")
        elif (isinstance(sub, ast.Call) and sub.args and ast.unparse(sub.func).endswith("import_module")):
            name = _literal_name(sub.args[0], module)
            if name is not None and name.startswith("ddflow"):
                found.add(name)
    if everywhere and imports_root:
        exports = _root_exports()
        for sub in nodes:
            if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "ddflow"
                    and sub.attr in exports):
                found.add(exports[sub.attr])
    return found


def test_the_checker_reads_every_kind_of_import(tmp_path):
    """A planted upward import of each kind is found (so a clean tree means something)."""
    src = tmp_path / "m.py"
    src.write_text("import importlib\nfrom typing import TYPE_CHECKING\nimport ddflow\n"
                   "if TYPE_CHECKING:\n    from ddflow.plan.ir import Rel\n"
                   "def f():\n    from ddflow.sql.frontend import SqlFrontend\n"
                   "    importlib.import_module('ddflow.streaming.cluster')\n"
                   "    importlib.import_module(f'{__name__}.inner')\n"
                   "    return ddflow.Dataflow\n")
    got = _imports(src, "ddflow.dataflow", everywhere=True)
    assert "ddflow.plan.ir" not in got  # a type named for annotations only
    assert {"ddflow.sql.frontend", "ddflow.streaming.cluster", "ddflow.dataflow.inner",
            "ddflow.facade"} <= got
    assert _imports(src, "ddflow.dataflow", everywhere=False) == {"ddflow"}


def test_no_import_points_up_even_inside_functions():
    mods = _modules()
    upward = sorted((m, t) for m, p in mods.items() for t in _imports(p, m, everywhere=True, mods=set(mods))
                    if layer_of(m) is not None and layer_of(t) is not None and layer_of(t) > layer_of(m))
    assert not upward, f"imports pointing up a layer: {upward}"


def test_no_module_level_import_cycles():
    mods = _modules()
    graph = {m: {t for t in _imports(p, m, everywhere=False) if t in mods} for m, p in mods.items()}
    # Cycles: depth-first search over module-level imports (a package importing its own modules is fine, and
    # so is ``from pkg import module`` at the end of a module: plan/expr.py fills its function table so).
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


def test_every_package_folder_is_installed():
    """A wheel holds only the packages pyproject.toml lists: a folder left out (ddflow.datalog was) imports only
    from a source checkout, never from ``pip install .``."""
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {name: ROOT / path for name, path in setuptools["package-dir"].items()} == FOLDERS
    found = {name + "".join("." + p for p in init.parent.relative_to(folder).parts)
             for name, folder in FOLDERS.items() for init in folder.rglob("__init__.py")}
    assert found == set(setuptools["packages"])


_IMPORT_EACH_FIRST = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for m in [m for m in sys.modules if m.split(".")[0] in ("ddflow", "traces") and m != "ddflow._native"]:
        del sys.modules[m]
    try:
        importlib.import_module(name)
    except Exception as err:  # noqa: BLE001
        failed.append(f"{name}: {type(err).__name__}: {err}")
print("\\n".join(failed))
"""


def test_every_plan_and_sql_module_imports_first():
    """Each module of the function table's layers imports as the first ddflow module of a process: the modules that
    register functions import one another in cycles, which hold only where each reads the others late."""
    import subprocess
    import sys

    names = sorted(m for m in _modules() if m.startswith(("ddflow.plan.", "ddflow.sql.")))
    out = subprocess.run([sys.executable, "-c", _IMPORT_EACH_FIRST, *names], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert not out.stdout.strip(), out.stdout
