"""TPC-DS: the 99 queries as views, equal to DuckDB at every complete time of random inserts and deletes.

dsdgen's tables at SF 0.01 (cached Parquet, generated on first use:
:mod:`bench.tpcds.data`) are loaded at time 0; then refreshes of the six
sales and returns tables (random deletes, inserts from a held-back pool),
one per data time, two or three data times per frontier advance.  At
every time, every view's accumulated rows are DuckDB's answer on the
accumulated tables (top-k views: a valid top k).  Queries known to fail
are ``xfail(strict=True)`` with the reason: one that starts to pass fails
the test until it is taken off ``KNOWN_FAILING``, and a passing one that
starts failing fails it too.

All 99 run at W=1 in one dataflow (about 2 minutes on this machine, the
data cached; a fresh cache adds about 8 s: the scratch venv from PyPI and
dsdgen), and a sample of the passing ones (joins, windows, ROLLUP) again
at W=2 (``SAMPLE_W2``).
"""
from __future__ import annotations

import functools

import pytest

from bench.tpcds import check, data
from bench.tpcds.queries import all_queries, spark
from bench.tpcds.stream import KEYS, Churn

SF = 0.01

#: Query -> why it fails now (``refused: `` or ``error: `` and the message's first line, less positions and
#: counts).  Remove a query once it passes; the strict xfail says so.  (python -m bench.tpcds.check, SF 0.01.)
KNOWN_FAILING: dict[int, str] = {
    **dict.fromkeys((12, 20, 59, 61, 98),
                    "error: a decimal result of more than 18 digits is stored (a ratio of DECIMAL(17,2) sums is "
                    "DECIMAL(37,20), 1.0 needs 21 digits) and ddflow stores decimals in int64; exact inside an "
                    "expression (q2, q74, q75 round or compare theirs), raised at run"),
    49: "error: a stored DECIMAL(35,20) return ratio (DECIMAL(15,4) / DECIMAL(15,4)) needs more than 18 digits "
        "past 0.092; ddflow stores decimals in int64",
    66: "wrong: an int column in decimal arithmetic is DECIMAL(20,0) here, DECIMAL(10,0) in Spark and DuckDB, so "
        "SUM(dec * int) / int has scale 6 here where theirs has 12 (docs/sql.md: the int difference)",
}

#: The spec's parameters leave these answers empty on SF 0.01's tables (one store, 180 items, one reason);
#: values from the data's own domains instead, so the check compares rows.  The constructs are unchanged.
TINY_PARAMETERS: dict[int, list[tuple[str, str]]] = {
    3: [("i_manufact_id = 128", "i_manufact_id = 167")],
    8: [("COUNT(*) > 10", "COUNT(*) > 0"), ("'31671'", "'31289'")],
    10: [("'Rush County'", "'Halifax County'"), ("'Toole County'", "'Muskingum County'"),
         ("'Dona Ana County'", "'Dinwiddie County'"), ("'La Porte County'", "'Pendleton County'"),
         ("d_year = 2002", "d_year = 1998")],
    11: [("2001", "1999")],
    74: [("2001", "1999")],
    19: [("i_manager_id = 8", "i_manager_id = 23")],
    23: [("COUNT(*) > 4", "COUNT(*) > 1"), ("d_moy = 2", "d_moy = 11")],
    25: [("d_year = 2001", "d_year = 1998"), ("d_moy = 4", "d_moy = 9"), ("BETWEEN 4 AND 10", "BETWEEN 4 AND 12")],
    30: [("ca_state = 'GA'", "ca_state = 'TX'")],
    37: [("BETWEEN 68 AND 68 + 30", "BETWEEN 0 AND 0 + 30"), ("(677, 940, 694, 808)", "(12, 26, 46, 47)")],
    39: [("d_moy = 1", "d_moy = 2")],
    41: [("738 AND 738 + 40", "600 AND 600 + 400")],
    44: [("ss_store_sk = 4", "ss_store_sk = 1")],
    49: [("> 10000", "> 1000"), ("d_year = 2001", "d_year = 2000")],
    58: [("'2000-01-03'", "'1998-07-28'"), ("0.9 *", "0.5 *"), ("1.1 *", "1.5 *")],
    64: [("BETWEEN 64 AND 64 + 10", "BETWEEN 5 AND 5 + 10"),
         ("BETWEEN 64 + 1 AND 64 + 15", "BETWEEN 5 + 1 AND 5 + 15")],
    65: [("0.1 * sb.ave", "0.9 * sb.ave")],
    73: [("cnt BETWEEN 1 AND 5", "cnt BETWEEN 1 AND 10")],
    82: [("BETWEEN 62 AND 62 + 30", "BETWEEN 0 AND 0 + 30"), ("(129, 270, 821, 423)", "(12, 26, 46, 47)")],
    83: [("'2000-06-30', '2000-09-27', '2000-11-17'", "'1999-03-23', '1999-05-11', '2000-05-23'")],
    85: [("d_year = 2000", "d_year = 2001"), ("= 'M'", "= 'U'"), ("'Advanced Degree'", "'Primary'"),
         ("= 'S'", "= 'D'"), ("'College'", "'Secondary'"), ("'IN', 'OH', 'NJ'", "'WA', 'OH', 'NJ'")],
    91: [("d_year = 1998", "d_year = 2000"), ("d_moy = 11", "d_moy = 9"), ("'W' AND", "'D' AND"),
         ("'M' AND cd_education_status = 'Unknown'", "'S' AND cd_education_status = 'College'")],
    93: [("'reason 28'", "'Package was damaged'")],
}
#: Passing queries whose answer is empty on SF 0.01 all the same (q31: no county has store and web sales in
#: all three quarters of 2000).
EMPTY: dict[int, str] = {
    4: "in no two years does a customer buy in all three channels with catalog growth above store's and web's",
    24: "no customer lives in the one store's zip (31904)",
    31: "no county with store and web sales in each quarter of 2000",
    54: "no customer lives in the one store's county (Williamson County, TN)",
}

#: Run again at W=2 (two worker processes).
SAMPLE_W2 = (1, 9, 36, 38, 42, 47, 69, 81, 86)


def tiny(n: int) -> str:
    """Query ``n`` with :data:`TINY_PARAMETERS`."""
    text = spark(n)
    for old, new in TINY_PARAMETERS.get(n, []):
        assert old in text, (n, old)
        text = text.replace(old, new)
    return text


@functools.lru_cache(maxsize=None)
def results(workers: int) -> dict[int, dict]:
    """Per query its status; the queries in one dataflow (each alone if running them together fails)."""
    tables = data.load(SF)
    qs = sorted(all_queries()) if workers == 1 else list(SAMPLE_W2)
    alone = [n for n in qs if KNOWN_FAILING.get(n, "").startswith("error:")]  # would fail the shared run
    out = check.run_each({n: tiny(n) for n in qs if n not in alone}, tables, workers=workers)
    for n in alone:
        out.update(check.run_each({n: tiny(n)}, tables, workers=workers))
    return out


def _params(qs):
    out = []
    for n in qs:
        if n in KNOWN_FAILING:
            out.append(pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILING[n])))
        else:
            out.append(n)
    return out


def _assert_equal(r: dict, n: int) -> None:
    assert r["status"] == "equal", f"q{n} {r['status']}: {r['message']}"
    assert r["times"] == 1 + sum(check.ADVANCES), r


@pytest.mark.parametrize("n", _params(range(1, 100)))
def test_query_equals_duckdb_at_every_complete_time(n):
    _assert_equal(results(1)[n], n)


@pytest.mark.parametrize("n", _params(SAMPLE_W2))
def test_query_equals_duckdb_with_two_workers(n):
    _assert_equal(results(2)[n], n)


def test_every_passing_query_has_rows_to_compare():
    """An empty answer checks little: every query that passes has rows at the end (but those in ``EMPTY``)."""
    empty = sorted(n for n, r in results(1).items() if r["status"] == "equal" and not r["rows"] and n not in EMPTY)
    assert not empty, f"empty answers on SF 0.01: {empty}: add parameters to TINY_PARAMETERS"


def test_a_view_that_misses_the_deletes_is_caught(monkeypatch):
    """The check can fail: a dataflow that drops every refresh's deletes is WRONG at the first refresh."""
    from bench.tpcds.oracle import Views

    real = Views.apply

    def inserts_only(self, r, time):
        real(self, type(r)(r.inserts, {t: d.slice(0, 0) for t, d in r.deletes.items()}), time)

    monkeypatch.setattr(Views, "apply", inserts_only)
    q = "SELECT COUNT(*) AS n, SUM(ss_quantity) AS q FROM store_sales"
    r = check.run({0: q}, data.load(SF))[0]
    assert r["status"] == "wrong" and r["message"].startswith("time 1:"), r


def test_the_stream_deletes_present_rows_and_inserts_held_back_ones():
    tables = data.load(SF)
    churn = Churn(tables, seed=5)
    present = {n: {tuple(x.values()) for x in t.select(KEYS[n]).to_pylist()} for n, t in churn.initial().items()}
    for n, t in tables.items():
        if n in KEYS:
            assert len(present[n]) == t.num_rows - round(0.02 * t.num_rows)  # keys are unique; 2% held back
    for _ in range(3):
        r = churn.refresh(0.001)
        for n, key in KEYS.items():
            ins = {tuple(x.values()) for x in r.inserts[n].select(key).to_pylist()}
            dels = {tuple(x.values()) for x in r.deletes[n].select(key).to_pylist()}
            assert len(ins) == len(dels) == max(1, round(0.001 * tables[n].num_rows))
            assert dels <= present[n] and not ins & present[n]
            present[n] = (present[n] - dels) | ins


def test_the_benchmark_runs_checks_and_reports(tmp_path, monkeypatch, capsys):
    import json

    from bench.tpcds import __main__ as bench

    args = ["--sf", str(SF), "--queries", "q42", "--refreshes", "2", "--json", str(tmp_path / "t.jsonl")]
    assert bench.main(args) == 0
    (line,) = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert line["query"] == "q42" and line["correct"] and line["refreshes"] == 2
    assert "| q42 |" in capsys.readouterr().out
    monkeypatch.setattr(bench, "compare", lambda got, duck, n: "a planted difference")
    assert bench.main(args[:-2]) == 1
    assert "q42: ddflow differs from DuckDB at time 0: a planted difference" in capsys.readouterr().err
