"""TPC-DS data and queries from dsdgen, cached as Parquet: made once per scale factor in a scratch venv.

DuckDB's TPC-DS extension (the PyPI package ``duckdb-extension-tpcds``)
holds dsdgen and the 99 queries, but it is built for DuckDB 1.5.5 only,
and the project's venv has another DuckDB.  So :func:`ensure` makes a
scratch venv (``duckdb==1.5.5`` and the extension, from PyPI) once, runs
``CALL dsdgen(sf=SF)`` in it, and writes each of the 24 tables to
``<cache>/sf<SF>/<table>.parquet`` and the 99 query texts (DuckDB's
``tpcds_queries()``) to ``<cache>/queries.json``.  The cache is
``$DDFLOW_TPCDS_CACHE``, or ``~/.cache/ddflow/tpcds``.  Writing goes to a
temporary folder renamed at the end, so a killed run leaves no half cache.

Cost: the venv once (about 5 s from PyPI), dsdgen about 0.5 s at SF 0.01,
8 s at SF 0.1, 50 s at SF 1 (371 MB of Parquet); reading the Parquet back is a fraction of that.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

DUCKDB_VERSION = "1.5.5"
PACKAGES = (f"duckdb=={DUCKDB_VERSION}", f"duckdb-extension-tpcds=={DUCKDB_VERSION}")

#: The 24 tables dsdgen writes.
TABLES = ("call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer", "customer_address",
          "customer_demographics", "date_dim", "household_demographics", "income_band", "inventory", "item",
          "promotion", "reason", "ship_mode", "store", "store_returns", "store_sales", "time_dim", "warehouse",
          "web_page", "web_returns", "web_sales", "web_site")

#: Runs inside the scratch venv: argv = out folder, scale factor (or "queries").
_SCRIPT = r"""
import json, os, sys
import duckdb, duckdb_extension_tpcds as ext
out, sf = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute("SET threads TO 1")
con.execute("SET enable_progress_bar = false")
path = os.path.join(os.path.dirname(ext.__file__), "extensions", "v" + duckdb.__version__, "tpcds.duckdb_extension")
con.execute(f"LOAD '{path}'")
if sf == "queries":
    rows = con.execute("SELECT query_nr, query FROM tpcds_queries() ORDER BY query_nr").fetchall()
    with open(os.path.join(out, "queries.json"), "w") as f:
        json.dump({str(n): q for n, q in rows}, f, indent=0)
else:
    con.execute(f"CALL dsdgen(sf={float(sf)})")
    for (t,) in con.execute("SHOW TABLES").fetchall():
        con.execute(f"COPY {t} TO '{os.path.join(out, t + '.parquet')}' (FORMAT parquet)")
"""


def cache_dir() -> Path:
    """Where the venv, the data and the queries live (``$DDFLOW_TPCDS_CACHE`` or ``~/.cache/ddflow/tpcds``)."""
    return Path(os.environ.get("DDFLOW_TPCDS_CACHE") or Path.home() / ".cache" / "ddflow" / "tpcds")


def sf_name(sf: float) -> str:
    """The folder of one scale factor.

    >>> sf_name(0.01), sf_name(1)
    ('sf0.01', 'sf1')
    """
    return f"sf{sf:g}"


def venv_python() -> Path:
    """The scratch venv's interpreter, made (with DuckDB 1.5.5 and its TPC-DS extension) if missing."""
    venv = cache_dir() / "venv"
    py = venv / "bin" / "python"
    ok = venv / ".ddflow-ready"
    if not ok.exists():
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PACKAGES], check=True)
        ok.write_text(" ".join(PACKAGES) + "\n")
    return py


def _make(target: Path, arg: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        subprocess.run([str(venv_python()), "-c", _SCRIPT, str(tmp), arg], check=True)
        if arg == "queries":
            os.replace(tmp / "queries.json", target)
        else:
            os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure(sf: float) -> Path:
    """The folder of Parquet files at scale factor ``sf``, generated if missing."""
    d = cache_dir() / sf_name(sf)
    if not all((d / f"{t}.parquet").exists() for t in TABLES):
        shutil.rmtree(d, ignore_errors=True)
        _make(d, repr(float(sf)))
    return d


def load(sf: float, names: Iterable[str] | None = None) -> dict[str, pa.Table]:
    """The tables ``names`` (default all 24) at ``sf`` as Arrow tables (dsdgen's types: bigint keys,
    decimal(7,2) money, date, string)."""
    d = ensure(sf)
    return {t: pq.read_table(d / f"{t}.parquet") for t in TABLES if names is None or t in set(names)}


def duckdb_queries() -> dict[int, str]:
    """The 99 queries as DuckDB's extension has them (query number -> text), cached."""
    path = cache_dir() / "queries.json"
    if not path.exists():
        _make(path, "queries")
    return {int(n): q for n, q in json.loads(path.read_text()).items()}


def sql_type(t: pa.DataType) -> str:
    """ddflow's SQL type for an Arrow type dsdgen writes.

    >>> sql_type(pa.decimal128(7, 2)), sql_type(pa.int32()), sql_type(pa.large_string())
    ('decimal(7,2)', 'int', 'string')
    """
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_int64(t):
        return "bigint"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_date32(t):
        return "date"
    raise TypeError(f"no ddflow type for {t}")


def schema(table: pa.Table) -> dict[str, str]:
    """Column name -> ddflow SQL type."""
    return {f.name: sql_type(f.type) for f in table.schema}


def normalize(table: pa.Table) -> pa.Table:
    """``table`` with large strings as plain strings (what ddflow's inputs take)."""
    cols = [c.cast(pa.string()) if pa.types.is_large_string(c.type) else c for c in table.columns]
    return pa.table(cols, names=table.column_names)
