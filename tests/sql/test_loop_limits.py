"""Limits users set on recursive queries (issue 58): ``max_iterations``, ``max_seconds`` and ``max_records`` reach
the loop of a ``WITH RECURSIVE`` fixpoint and of a recursive Datalog stratum, and the error says why the loop
did not converge: it grew without bound (a rule deriving new values forever) or it changed without growing.
"""
from __future__ import annotations

import pytest

import ddflow
from ddflow.errors import NonConvergence, UsageError

COUNTER = "WITH RECURSIVE n(x) AS (SELECT a FROM t UNION SELECT x + 1 FROM n) SELECT x FROM n"
FOREVER = """
    .decl s(x: symbol)
    .decl seed(x: symbol)
    .input seed
    s(x) :- seed(x).
    s(cat(x, "a")) :- s(x).
"""


def _run_sql(query: str, **limits):
    flow = ddflow.Dataflow()
    t_in, _ = flow.new_collection("t", schema={"a": "bigint"})
    cap = flow.sql(query, **limits).capture()
    t_in.update([(1,)], times=0)
    flow.advance_to(1)
    flow.run()
    return cap


def _run_datalog(program: str, **limits):
    flow = ddflow.Dataflow()
    s_in, _ = flow.new_collection("seed", schema={"c0": "string"})
    caps = {r: c.capture() for r, c in flow.datalog(program, **limits).items()}
    s_in.update([("",)], times=0)
    flow.advance_to(1)
    flow.run()
    return caps


@pytest.mark.timeout(120)
def test_sql_max_iterations_names_the_loop_and_the_growth():
    with pytest.raises(NonConvergence, match=r"loop 'recursive\(n\)(#\d+)?' did not converge within max_iterations=40: "
                                             r"it still derives new records") as info:
        _run_sql(COUNTER, max_iterations=40)
    assert "nonnegative" not in str(info.value)  # the hint for oscillation is beside the point here


@pytest.mark.timeout(120)
def test_sql_max_records_stops_the_growth():
    with pytest.raises(NonConvergence, match=r"holds [\d,]+ records in its variables after iteration \d+, more than "
                                             r"max_records=50; 'n' holds"):
        _run_sql(COUNTER, max_records=50)


@pytest.mark.timeout(120)
def test_sql_max_seconds_reaches_the_loop():
    with pytest.raises(NonConvergence, match=r"did not converge within max_seconds=0.2: it still derives"):
        _run_sql(COUNTER, max_seconds=0.2)


def test_limits_do_not_change_a_converging_query():
    q = "WITH RECURSIVE n(x) AS (SELECT a FROM t UNION SELECT x + 1 FROM n WHERE x < 5) SELECT x FROM n"
    assert _run_sql(q, max_iterations=50, max_records=100, max_seconds=60).contents(0) == {(i,): 1 for i in range(1, 6)}
    with pytest.raises(UsageError, match="max_iterations is a positive integer"):
        _run_sql(q, max_iterations=0)
    with pytest.raises(UsageError, match="max_records is a positive integer"):
        _run_sql(q, max_records=1.5)


@pytest.mark.timeout(120)
def test_datalog_that_derives_forever_is_stopped_by_its_limits():
    """``s(cat(x, "a")) :- s(x).`` ran 33-39 s to 5.3 GB before NonConvergence, with a hint about removals."""
    with pytest.raises(NonConvergence, match=r"did not converge within max_iterations=200: it still derives new "
                                             r"records .* 's'") as info:
        _run_datalog(FOREVER, max_iterations=200)
    assert "nonnegative" not in str(info.value)
    with pytest.raises(NonConvergence, match=r"more than max_records=100; 's' holds"):
        _run_datalog(FOREVER, max_records=100)
    with pytest.raises(NonConvergence, match=r"max_seconds=0.2"):
        _run_datalog(FOREVER, max_seconds=0.2)


def test_a_loop_that_changes_without_growing_says_so():
    """Removals of an absent record circulate without growing anything: the old hint stands there."""
    flow = ddflow.Dataflow()
    h, c = flow.new_collection("c", nonnegative=None)
    c.iterate(lambda x: x.map(lambda r: ((r[0] + 1) % 3,)).distinct(), name="spin", max_iterations=30).capture()
    h.insert((1,), time=0)
    flow.advance_to(1)
    with pytest.raises(NonConvergence, match=r"loop 'spin' did not converge within max_iterations=30 \(still "
                                             r"changing at iteration \d+, input times \[0\], without growing\)"):
        flow.run()
