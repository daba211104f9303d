"""Plain-Python reference evaluation for the engine tests.

A *multiset* here is a dict ``row -> multiplicity`` without zero entries;
multiplicities may be negative (the input of a differential collection is
any signed multiset).  Every helper evaluates a query from scratch, the
way a textbook would, so that the engine's incremental answer at each
complete time can be compared with it.

``run_scenario`` drives a dataflow through a schedule of input batches and
frontier advances and checks, after every ``run()``, the captured output at
every complete time against the oracle.  It does so once per worker count
in ``WORKERS`` (``DDFLOW_TEST_WORKERS``, default ``1,2,3``: 3 is not a power
of two) and requires the same consolidated output changes from each.  ``schedules`` and
``nonneg_schedules`` are hypothesis strategies for those schedules.
"""
from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from typing import Any, Callable, Iterable, Sequence

from hypothesis import strategies as st

import ddflow

Multiset = dict[tuple, int]

#: Worker counts every scenario runs at; the first one's dataflow and capture are returned.
WORKERS = tuple(int(w) for w in os.environ.get("DDFLOW_TEST_WORKERS", "1,2,3").split(","))
#: ``DDFLOW_TEST_SPARK=local-cluster[2,1,1024]``: every scenario's W > 1 runs as Spark barrier tasks on that
#: master (one session for the process), e.g. to run the whole engine suite on executors.
SPARK_MASTER = os.environ.get("DDFLOW_TEST_SPARK")
_SESSION: list = []


def _spark() -> Any:
    if SPARK_MASTER is None:
        return None
    import sys

    from pyspark import cloudpickle

    if not _SESSION:
        from ddflow.streaming.spark import local_session

        _SESSION.append(local_session("ddflow-oracle", SPARK_MASTER))
    for name, mod in list(sys.modules.items()):  # the tests' own functions go to the executors by value
        if name == "oracle" or name.split(".")[-1].startswith("test_"):
            cloudpickle.register_pickle_by_value(mod)
    return _SESSION[0]
Update = tuple[tuple, int, int]  # (row, time, diff)


# -- multisets --------------------------------------------------------------------------------


def clean(d: dict) -> Multiset:
    return {r: m for r, m in d.items() if m}


def accumulate(updates: Iterable[Update], t: int) -> Multiset:
    """The collection at time ``t``: the diffs of updates at times ``<= t``, added up."""
    acc: dict[tuple, int] = defaultdict(int)
    for row, time, diff in updates:
        if time <= t:
            acc[row] += diff
    return clean(acc)


def add(*sets: Multiset) -> Multiset:
    acc: dict[tuple, int] = defaultdict(int)
    for s in sets:
        for r, m in s.items():
            acc[r] += m
    return clean(acc)


def negate(s: Multiset) -> Multiset:
    return {r: -m for r, m in s.items()}


def scale(s: Multiset, k: int) -> Multiset:
    return clean({r: m * k for r, m in s.items()})


def fmap(s: Multiset, fn: Callable[[tuple], tuple]) -> Multiset:
    acc: dict[tuple, int] = defaultdict(int)
    for r, m in s.items():
        acc[fn(r)] += m
    return clean(acc)


def flat_map(s: Multiset, fn: Callable[[tuple], Iterable[tuple]]) -> Multiset:
    acc: dict[tuple, int] = defaultdict(int)
    for r, m in s.items():
        for o in fn(r):
            acc[o] += m
    return clean(acc)


def ffilter(s: Multiset, fn: Callable[[tuple], bool]) -> Multiset:
    return {r: m for r, m in s.items() if fn(r)}


def project(s: Multiset, *idx: int) -> Multiset:
    return fmap(s, lambda r: tuple(r[i] for i in idx))


def join(a: Multiset, b: Multiset) -> Multiset:
    """``(key, *a_vals, *b_vals)`` with multiplicities multiplied."""
    by_key: dict[Any, list[tuple[tuple, int]]] = defaultdict(list)
    for r, m in b.items():
        by_key[r[0]].append((r, m))
    acc: dict[tuple, int] = defaultdict(int)
    for ra, ma in a.items():
        for rb, mb in by_key.get(ra[0], ()):
            acc[(ra[0], *ra[1:], *rb[1:])] += ma * mb
    return clean(acc)


def key_counts(s: Multiset) -> dict[Any, int]:
    acc: dict[Any, int] = defaultdict(int)
    for r, m in s.items():
        acc[r[0]] += m
    return acc


def semijoin(a: Multiset, keys: Multiset) -> Multiset:
    """Records of ``a`` times the multiplicity of their key among the first fields of ``keys``."""
    kc = key_counts(keys)
    return clean({r: m * kc.get(r[0], 0) for r, m in a.items()})


def antijoin(a: Multiset, keys: Multiset) -> Multiset:
    return add(a, negate(semijoin(a, keys)))


def groups(s: Multiset) -> dict[Any, list[tuple[tuple, int]]]:
    """Key -> sorted ``[(value_tuple, mult)]`` of nonzero multiplicities."""
    g: dict[Any, list[tuple[tuple, int]]] = defaultdict(list)
    for r, m in s.items():
        if m:
            g[r[0]].append((tuple(r[1:]), m))
    return {k: sorted(v) for k, v in g.items()}


def reduce(s: Multiset, fn: Callable[[Any, list[tuple[tuple, int]]], list[tuple[tuple, int]]]) -> Multiset:
    """``fn`` per key over its nonzero values, giving ``(key, *out_val)``."""
    acc: dict[tuple, int] = defaultdict(int)
    for k, vals in groups(s).items():
        for v, m in fn(k, vals):
            acc[(k, *v)] += m
    return clean(acc)


def count(s: Multiset) -> Multiset:
    return {(*r, m): 1 for r, m in s.items() if m}


def distinct(s: Multiset) -> Multiset:
    return {r: 1 for r, m in s.items() if m > 0}


def threshold(s: Multiset, fn: Callable[[int], int]) -> Multiset:
    return clean({r: fn(m) for r, m in s.items() if m})


def ssum(s: Multiset) -> Multiset:
    """``(key, sum of value * mult)`` for every key with a nonzero multiplicity (reduce semantics)."""
    return reduce(s, lambda k, vals: [((sum(v[0] * m for v, m in vals),), 1)])


def smin(s: Multiset) -> Multiset:
    def f(k, vals):
        live = [v for v, m in vals if m > 0]
        return [(min(live), 1)] if live else []
    return reduce(s, f)


def smax(s: Multiset) -> Multiset:
    def f(k, vals):
        live = [v for v, m in vals if m > 0]
        return [(max(live), 1)] if live else []
    return reduce(s, f)


def top_k(s: Multiset, k: int) -> Multiset:
    def f(key, vals):
        out, left = [], k
        for v, m in sorted(vals):
            if m <= 0:
                continue
            take = min(m, left)
            if take <= 0:
                break
            out.append((v, take))
            left -= take
        return out
    return reduce(s, f)


def fixpoint(init: Multiset, body: Callable[[Multiset], Multiset], max_iterations: int = 10_000) -> Multiset:
    """Differential ``iterate``: x0 = init, x(i+1) = body(x(i)), until it stops changing."""
    x = init
    for _ in range(max_iterations):
        nxt = body(x)
        if nxt == x:
            return x
        x = nxt
    raise AssertionError("oracle loop did not converge")


# -- driving a dataflow ------------------------------------------------------------------------

#: A schedule: a list of steps ``(updates, advance_to)``; updates are ``(input_name, row, time, diff)``.
Step = tuple[list[tuple[str, tuple, int, int]], int]


def run_scenario(
    inputs: Sequence[str],
    build: Callable[..., "ddflow.Collection"],
    query: Callable[..., Multiset],
    schedule: Sequence[Step],
    per_row: bool = False,
    check: Callable[[ddflow.Dataflow, Any, int], None] | None = None,
    feed: Callable[[Any, list[tuple], list[int], list[int]], None] | dict | None = None,
    workers: Sequence[int] | None = None,
    spark: Any = None,
) -> tuple[ddflow.Dataflow, Any]:
    """Feed ``schedule`` to the dataflow ``build(*input_collections)`` and compare with ``query``.

    After every ``advance_to`` + ``run``, for every complete time ``t`` the
    captured output accumulated at ``t`` must equal ``query`` of the inputs
    accumulated at ``t``.  ``per_row`` feeds updates one ``insert``/``remove``
    call at a time instead of one ``update`` call per input and step;
    ``feed(handle, rows, times, diffs)`` (or a dict of them by input name)
    replaces that ``update`` call, e.g. to feed Arrow tables.  The whole check
    runs once per worker count (``workers``, default :data:`WORKERS`), and every
    count must produce exactly the first one's output changes.  With
    ``spark`` (a session, or ``DDFLOW_TEST_SPARK``), counts above 1 run as
    Spark barrier tasks.
    """
    expected: dict[int, Multiset] = {}  # the oracle's answers, shared by the runs
    first = None
    for w in workers or WORKERS:
        flow, cap = _run_once(w, inputs, build, query, schedule, per_row, check, feed, expected, spark or _spark())
        if first is None:
            first = (flow, cap, cap.changes())
        else:
            try:
                assert cap.changes() == first[2], (
                    f"{w} workers produced other output changes than {first[0].workers}\n"
                    f"  {w}: {cap.changes()}\n  {first[0].workers}: {first[2]}")
            finally:
                flow.close()
    return first[0], first[1]


def _run_once(workers, inputs, build, query, schedule, per_row, check, feed, expected, spark=None):
    flow = ddflow.Dataflow(workers=workers, spark=spark if workers > 1 else None)
    try:
        return _drive(flow, inputs, build, query, schedule, per_row, check, feed, expected)
    except BaseException:
        flow.close()
        raise


def _drive(flow, inputs, build, query, schedule, per_row, check, feed, expected):
    handles, colls = {}, []
    for name in inputs:
        h, c = flow.new_collection(name)
        handles[name] = h
        colls.append(c)
    out = build(*colls)
    cap = out.capture()
    submitted: dict[str, list[Update]] = {name: [] for name in inputs}
    for updates, frontier in schedule:
        by_input: dict[str, list[tuple[tuple, int, int]]] = defaultdict(list)
        for name, row, time, diff in updates:
            assert time >= flow.frontier, "bad schedule: update before the frontier"
            by_input[name].append((row, time, diff))
            submitted[name].append((row, time, diff))
        for name, ups in by_input.items():
            h = handles[name]
            f = feed.get(name) if isinstance(feed, dict) else feed
            if f is not None:
                f(h, [u[0] for u in ups], [u[1] for u in ups], [u[2] for u in ups])
            elif per_row:
                for row, time, diff in ups:
                    for _ in range(abs(diff)):
                        (h.insert if diff > 0 else h.remove)(row, time=time)
            else:
                h.update([u[0] for u in ups], [u[1] for u in ups], [u[2] for u in ups])
        flow.advance_to(frontier)
        flow.run()
        assert cap.frontier == flow.frontier
        # The output at every complete time, accumulated in one pass over the changes ...
        changes = sorted(cap.changes(), key=lambda c: c[1])
        acc: dict[tuple, int] = defaultdict(int)
        i = 0
        data_times = {u[2] for u in updates if u[2] < flow.frontier} | {flow.frontier - 1}
        for t in range(flow.frontier):
            while i < len(changes) and changes[i][1] <= t:
                acc[changes[i][0]] += changes[i][2]
                i += 1
            if t not in expected:
                expected[t] = query(*(accumulate(submitted[name], t) for name in inputs))
            got = clean(acc)
            # ... and, at this step's data times and the last complete time, through Capture.contents.
            if t in data_times:
                assert cap.contents(t) == got, f"Capture.contents({t}) disagrees with Capture.changes()"
            assert got == expected[t], (
                f"output at complete time {t} (frontier {flow.frontier}) differs from the oracle\n"
                f"  engine: {sorted(got.items())}\n  oracle: {sorted(expected[t].items())}\n"
                f"  inputs: { {n: sorted(accumulate(submitted[n], t).items()) for n in inputs} }"
            )
        if check is not None:
            check(flow, cap, flow.frontier)
    changes = cap.changes()
    keys = [(r, t) for r, t, _ in changes]
    assert len(keys) == len(set(keys)), "capture.changes() is not consolidated"
    assert all(d != 0 for _, _, d in changes), "capture.changes() holds zero diffs"
    assert all(t < flow.frontier for _, t, _ in changes), "an output change at a time that is not complete"
    return flow, cap


# -- hypothesis strategies -----------------------------------------------------------------------

MAX_TIME = 20


def _frontiers(draw, max_time: int, max_steps: int) -> list[int]:
    k = draw(st.integers(0, max_steps - 1))
    cuts = sorted(set(draw(st.lists(st.integers(1, max_time), min_size=k, max_size=k))))
    return cuts + [max_time + 1]


def _assign_steps(draw, frontiers: list[int], updates: list[tuple[str, tuple, int, int]]) -> list[Step]:
    """Submit each update at a random step whose starting frontier does not exceed its time."""
    starts = [0] + frontiers[:-1]
    steps: list[list] = [[] for _ in frontiers]
    for u in updates:
        valid = [j for j, s in enumerate(starts) if s <= u[2]]
        steps[draw(st.sampled_from(valid))].append(u)
    return [(ups, f) for ups, f in zip(steps, frontiers)]


def int_rows(arity: int, lo: int = 0, hi: int = 5) -> st.SearchStrategy[tuple]:
    return st.tuples(*[st.integers(lo, hi)] * arity)


@st.composite
def schedules(draw, inputs: dict[str, st.SearchStrategy], max_updates: int = 25, max_time: int = MAX_TIME,
              diffs: Sequence[int] = (1, 1, 1, -1, 2, -2), max_steps: int = 7) -> list[Step]:
    """Random signed updates on each input (removals of absent records included)."""
    names = list(inputs)
    n = draw(st.integers(0, max_updates))
    ups = []
    for _ in range(n):
        name = draw(st.sampled_from(names))
        ups.append((name, draw(inputs[name]), draw(st.integers(0, max_time)), draw(st.sampled_from(diffs))))
    return _assign_steps(draw, _frontiers(draw, max_time, max_steps), ups)


@st.composite
def nonneg_schedules(draw, inputs: dict[str, st.SearchStrategy], max_updates: int = 25,
                     max_time: int = MAX_TIME, max_steps: int = 7) -> list[Step]:
    """Inserts, and removals only of records inserted no later: multiplicities never go negative."""
    names = list(inputs)
    n = draw(st.integers(0, max_updates))
    ups: list[tuple[str, tuple, int, int]] = []
    live: list[int] = []  # indices of inserts not yet paired with a removal
    for _ in range(n):
        if live and draw(st.integers(0, 2)) == 0:
            i = live.pop(draw(st.integers(0, len(live) - 1)))
            name, row, t0, _ = ups[i]
            ups.append((name, row, draw(st.integers(t0, max_time)), -1))
        else:
            name = draw(st.sampled_from(names))
            ups.append((name, draw(inputs[name]), draw(st.integers(0, max_time)), 1))
            live.append(len(ups) - 1)
    return _assign_steps(draw, _frontiers(draw, max_time, max_steps), ups)


# -- SQL views: the accumulated tables at every complete time, and rows as bags -----------------------


def replay(flow, handles: dict, steps) -> Iterable[tuple[int, dict[str, Counter]]]:
    """Feed each step's ``(table, row, time, diff)`` batch, advance to its frontier and run, then yield at every
    data time of the step, in order, ``(time, {table: Counter of its live rows})`` (copies, positive counts only).
    """
    acc = {name: Counter() for name in handles}
    for batch, frontier in steps:
        for table, row, t, d in batch:
            handles[table].update([row], t, d)
        flow.advance_to(frontier)
        flow.run()
        for t in sorted({t for _, _, t, _ in batch}):
            for table, row, tt, d in batch:
                if tt == t:
                    acc[table][row] += d
            yield t, {name: +rows for name, rows in acc.items()}


def sql_norm(v: Any) -> Any:
    """A value as both ddflow and DuckDB give it: finite floats rounded to 9 places."""
    if isinstance(v, float):
        return round(v, 9) if math.isfinite(v) else v
    return v


def sql_bag(rows: Iterable[tuple]) -> Counter:
    """Rows as a bag of normalized tuples."""
    return Counter(tuple(sql_norm(v) for v in r) for r in rows)
