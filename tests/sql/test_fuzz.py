"""The random differential SQL tester (tests/sql/fuzz.py) on fixed seeds: deterministic, about a minute.

Every query either equals DuckDB at every complete time, or is refused at
``flow.sql`` with a SchemaError, or fails at run where DuckDB fails too; a
TLP run checks that p / NOT p / p IS NULL partition each table.  Constructs
of bugs still open (tests/sql/test_regressions.py, xfail) are not generated
here (``KNOWN_OPEN``), or their error messages are counted as known
(``KNOWN_MESSAGES``): remove an entry when its regression test passes.
For longer runs: ``python -m tests.sql.fuzz --minutes 5``.
"""
from __future__ import annotations

import io

import fuzz

#: Generator tags of open bugs -> their regression test in test_regressions.py (not generated here).
KNOWN_OPEN: dict[str, str] = {
}
#: Error messages of open bugs -> their regression test (counted as known, not failures).
KNOWN_MESSAGES: dict[str, str] = {
}


def _run(seeds, features, n_queries, n_tlp=2) -> fuzz.Summary:
    out = io.StringIO()
    summary = fuzz.run_cases(seeds, set(features), n_queries, do_shrink=True, out=out,
                             avoid=frozenset(KNOWN_OPEN), n_tlp=n_tlp, known=tuple(KNOWN_MESSAGES))
    assert not summary.bugs, out.getvalue() + "\n" + summary.text()
    return summary


def test_random_queries_equal_duckdb_or_are_refused():
    summary = _run(range(1000, 1096), fuzz.FEATURES, n_queries=10)
    assert summary.tried == 96 * 12
    assert summary.statuses["pass"] > summary.tried // 2, summary.text()  # most queries are checked, not refused


def test_ternary_logic_partitions_each_table():
    """SELECT * FROM t WHERE p, WHERE NOT (p), WHERE (p) IS NULL together are SELECT * FROM t, at every time."""
    summary = _run(range(2000, 2024), ("exprs", "like", "decimal", "date", "tlp"), n_queries=0, n_tlp=8)
    assert summary.tried == 24 * 8 and summary.statuses["pass"] == summary.tried, summary.text()


def test_random_queries_with_spark_library_functions_equal_duckdb():
    """lpad, rpad, repeat, left, right, nvl / ifnull and instr in random queries (the opt-in feature ``library``)."""
    summary = _run(range(3000, 3024), set(fuzz.FEATURES) | {"library"}, n_queries=8)
    assert summary.tried == 24 * 10
    assert summary.statuses["pass"] > summary.tried // 2, summary.text()


def test_random_top_k_queries_and_multiset_operations_equal_duckdb():
    """ORDER BY ... LIMIT [OFFSET] on unselected expressions and aggregates, INTERSECT ALL and EXCEPT ALL (the
    opt-in features ``limits`` and ``setops_all``)."""
    summary = _run(range(4000, 4016), set(fuzz.FEATURES) | {"limits", "setops_all"}, n_queries=8)
    assert summary.tried == 16 * 10
    assert summary.statuses["pass"] > summary.tried * 0.9, summary.text()


def test_random_window_queries_qualify_and_correlated_in_equal_duckdb():
    """Window functions (rankings, LAG / LEAD, NTILE, aggregates over ROWS and RANGE frames), QUALIFY and correlated
    IN in random queries, ordered and limited too (the opt-in features ``windows``, ``correlated_in``, ``limits``)."""
    summary = _run(range(5000, 5024), set(fuzz.FEATURES) | {"windows", "correlated_in", "limits"}, n_queries=8)
    assert summary.tried == 24 * 10
    assert summary.statuses["pass"] > summary.tried * 0.9, summary.text()
    assert {"qualify", "window_lag", "window_sum_rows", "in_correlated"} <= set(summary.tag_counts), summary.text()
