"""Every example in ddflow.pipelines' docstrings runs (the module list of tests/test_docs.py, for this package)."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["ddflow.pipelines", "ddflow.pipelines.types", "ddflow.pipelines.source", "ddflow.pipelines.times",
           "ddflow.pipelines.changes", "ddflow.pipelines.sink", "ddflow.pipelines.envelopes",
           "ddflow.pipelines.delta_tables", "ddflow.pipelines.pipeline", "ddflow.pipelines.sdp"]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0


def test_importing_ddflow_loads_no_pipeline_dependency():
    import subprocess
    import sys
    code = ("import sys, ddflow, ddflow.pipelines; ddflow.Dataflow; "
            "print(sorted(m for m in ('deltalake', 'pyiceberg', 'pyspark', 'ddflow.pipelines') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['ddflow.pipelines']"
