"""Every Python code block of the README and the guide (docs/) runs, in order, one namespace per file.

A block that needs what a test cannot start on its own (a Spark cluster's
executors, a Kafka broker at the address the text names) is marked just
above it with ``<!-- guide: compile-only, REASON -->``: it is parsed, and
every ``ddflow`` name it imports must exist, so a renamed API still fails
here.  Everything else executes; its ``assert`` lines are the checks.
"""
from __future__ import annotations

import ast
import importlib
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- guide: (?P<mark>[^>]*?) -->\s*\n)?```python\n(?P<code>.*?)```", re.S)


def blocks(page: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """``(line, code, mark)`` of each Python block of ``page``."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start("code")) + 1, m.group("code"), m.group("mark")) for m in BLOCK.finditer(text)]


def test_the_guide_has_its_pages_and_the_readme_links_them():
    names = {p.name for p in PAGES}
    assert {"concepts.md", "sql.md", "event-time.md", "datalog.md", "streaming.md", "pipelines.md", "workers.md",
            "operations.md"} <= names
    readme = (ROOT / "README.md").read_text()
    for p in PAGES[1:]:
        assert f"docs/{p.name}" in readme, f"README.md does not link docs/{p.name}"
    assert len(readme.splitlines()) < 120, "the README is the opening; the rest belongs in docs/"


def _imported_names_resolve(code: str, where: str) -> None:
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ddflow"):
            mod = importlib.import_module(node.module)
            for a in node.names:
                assert hasattr(mod, a.name) or importlib.util.find_spec(f"{node.module}.{a.name}"), \
                    f"{where}: {node.module} has no {a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("ddflow"):
                    importlib.import_module(a.name)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_block_runs(page, tmp_path, monkeypatch):
    found = blocks(page)
    if page.name != "layout.md":
        assert found, f"{page.name} has no Python example"
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    namespace: dict = {"__name__": "__guide__"}
    for line, code, mark in found:
        where = f"{page.name}:{line}"
        if mark is not None:
            assert mark.startswith("compile-only, "), f"{where}: a mark says 'compile-only, WHY', not {mark!r}"
            _imported_names_resolve(code, where)
            continue
        try:
            exec(compile(code, where, "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{where}: the block raised {type(e).__name__}: {e}") from e
    for v in list(namespace.values()):  # what the blocks opened, closed (dataflows, servers, queries)
        close = getattr(v, "close", None) if hasattr(v, "closed") else None
        if callable(close) and not os.environ.get("DDFLOW_GUIDE_KEEP"):
            close()
