"""Composite dataflows against a from-scratch oracle at every complete time.

Loops (reachability, connected components, nested loops, mutual recursion)
get non-negative inputs (only present records are removed) so their fixed
points are well defined; the rest get arbitrary signed updates.  Also here:
resolution (one big batch of data times gives exactly the updates of one
run per data time) and bounded state under a sliding window.
"""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow
import oracle as O
from oracle import int_rows, nonneg_schedules, run_scenario, schedules


def examples(n: int) -> settings:
    """``n`` examples under the default (ci) profile, proportionally fewer under ``dev``."""
    return settings(max_examples=max(5, n * settings.default.max_examples // 100), deadline=None)


EXAMPLES = examples(80)
LOOP_EXAMPLES = examples(80)

NODES = 7  # node ids 0..NODES: small enough for collisions and cycles, big enough for long paths
EDGE = int_rows(2, 0, NODES)
NODE = int_rows(1, 0, NODES)
GRAPH = {"roots": NODE, "edges": EDGE}


# -- reachability -----------------------------------------------------------------------------


def reach_dataflow(roots: ddflow.Collection, edges: ddflow.Collection) -> ddflow.Collection:
    return roots.iterate(lambda r: r.join(edges).map(lambda t: (t[1],)).concat(roots).distinct(), name="reach")


def reach_oracle(roots: O.Multiset, edges: O.Multiset) -> O.Multiset:
    return O.fixpoint(roots, lambda r: O.distinct(O.add(O.fmap(O.join(r, edges), lambda t: (t[1],)), roots)))


@LOOP_EXAMPLES
@given(nonneg_schedules(GRAPH, max_updates=30))
def test_reachability(schedule):
    run_scenario(["roots", "edges"], reach_dataflow, reach_oracle, schedule)


def test_reachability_example():
    flow = ddflow.Dataflow()
    hr, roots = flow.new_collection("roots")
    he, edges = flow.new_collection("edges")
    cap = reach_dataflow(roots, edges).capture()
    hr.insert((0,), time=0)
    he.update([(0, 1), (1, 2), (2, 0), (3, 4)], [1, 2, 3, 4])
    he.remove((1, 2), time=7)
    he.insert((2, 3), time=8)
    flow.advance_to(5)
    flow.run()
    assert cap.contents(4) == {(0,): 1, (1,): 1, (2,): 1}
    he.insert((1, 2), time=9)
    flow.advance_to(10)
    flow.run()
    assert cap.contents(7) == {(0,): 1, (1,): 1}
    assert cap.contents(8) == {(0,): 1, (1,): 1}
    assert cap.contents(9) == {(0,): 1, (1,): 1, (2,): 1, (3,): 1, (4,): 1}
    assert [c for c in cap.changes() if c[1] == 7] == [((2,), 7, -1)]


# -- join + count, antijoin/semijoin + reduce(min) ---------------------------------------------------


@EXAMPLES
@given(schedules({"a": int_rows(2), "b": int_rows(2)}))
def test_join_then_count(schedule):
    run_scenario(["a", "b"], lambda a, b: a.join(b).count(), lambda a, b: O.count(O.join(a, b)), schedule)


@EXAMPLES
@given(schedules({"a": int_rows(2), "b": int_rows(2)}))
def test_join_project_count_by_key(schedule):
    run_scenario(["a", "b"], lambda a, b: a.join(b).project(0, 2).count().project(0, 2).sum(),
                 lambda a, b: O.ssum(O.project(O.count(O.project(O.join(a, b), 0, 2)), 0, 2)), schedule)


def _min_fn(k, vals):
    live = [v for v, m in vals if m > 0]
    return [(min(live), 1)] if live else []


@EXAMPLES
@given(schedules({"a": int_rows(2), "b": int_rows(1), "c": int_rows(2)}))
def test_antijoin_semijoin_then_min(schedule):
    def build(a, b, c):
        return a.antijoin(b).min().concat(a.semijoin(c).reduce(_min_fn).map(lambda r: (r[0] + 10, r[1])))

    def query(a, b, c):
        return O.add(O.smin(O.antijoin(a, b)), O.fmap(O.reduce(O.semijoin(a, c), _min_fn), lambda r: (r[0] + 10, r[1])))

    run_scenario(["a", "b", "c"], build, query, schedule)


# -- connected components: iterate + join + min ---------------------------------------------------------


def cc_dataflow(edges: ddflow.Collection) -> ddflow.Collection:
    sym = edges.concat(edges.map(lambda e: (e[1], e[0])))
    labels = edges.flat_map(lambda e: [(e[0], e[0]), (e[1], e[1])]).distinct()
    return labels.iterate(
        lambda l: l.join(sym).map(lambda t: (t[2], t[1])).concat(labels).min(), name="components")


def cc_oracle(edges: O.Multiset) -> O.Multiset:
    sym = O.add(edges, O.fmap(edges, lambda e: (e[1], e[0])))
    labels = O.distinct(O.flat_map(edges, lambda e: [(e[0], e[0]), (e[1], e[1])]))
    return O.fixpoint(labels, lambda l: O.smin(O.add(O.fmap(O.join(l, sym), lambda t: (t[2], t[1])), labels)))


def _components_by_union_find(edges: O.Multiset) -> O.Multiset:
    parent: dict[int, int] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for (a, b), m in edges.items():
        if m > 0:
            ra, rb = find(a), find(b)
            parent[max(ra, rb)] = min(ra, rb)
    return {(n, find(n)): 1 for n in list(parent)}


@LOOP_EXAMPLES
@given(nonneg_schedules({"edges": EDGE}, max_updates=30))
def test_connected_components(schedule):
    # The oracle mirrors the dataflow; check the mirror itself against union-find too.
    def query(edges):
        got = cc_oracle(edges)
        assert got == _components_by_union_find(edges)
        return got
    run_scenario(["edges"], cc_dataflow, query, schedule)


# -- k-core pruning: count and threshold inside a loop, with retractions across rounds ---------------------


def kcore_dataflow(edges, use_threshold=False):
    """Repeatedly drop edges with an endpoint of degree < 2 (the 2-core of the symmetric graph)."""
    sym = edges.concat(edges.map(lambda e: (e[1], e[0]))).filter(lambda e: e[0] != e[1]).distinct()

    def body(x):
        if use_threshold:
            good = x.project(0).threshold(lambda c: 1 if c >= 2 else 0)
        else:
            good = x.project(0).count().filter(lambda r: r[1] >= 2).project(0)
        return sym.semijoin(good).map(lambda e: (e[1], e[0])).semijoin(good).map(lambda e: (e[1], e[0]))
    return sym.iterate(body, name="kcore")


def kcore_oracle(edges):
    sym = O.distinct(O.ffilter(O.add(edges, O.fmap(edges, lambda e: (e[1], e[0]))), lambda e: e[0] != e[1]))

    def body(x):
        good = {(n,): 1 for (n,), m in O.project(x, 0).items() if m >= 2}
        swap = lambda e: (e[1], e[0])
        return O.fmap(O.semijoin(O.fmap(O.semijoin(sym, good), swap), good), swap)
    return O.fixpoint(sym, body)


@LOOP_EXAMPLES
@given(nonneg_schedules({"edges": EDGE}, max_updates=30), st.booleans())
def test_kcore(schedule, use_threshold):
    run_scenario(["edges"], lambda e: kcore_dataflow(e, use_threshold), kcore_oracle, schedule)


# -- nested loops ---------------------------------------------------------------------------------------


def nested_dataflow(roots, edges, jumps):
    """Outer loop over a node set S: S' = threshold(roots + reach_E(S) + jumps(reach_E(S))).

    reach_E(S) is an inner loop inside the outer one's body; the outer
    fixed point is reachability over edges and jumps together.
    """
    def outer(s):
        inner = s.iterate(lambda r: r.join(edges).map(lambda t: (t[1],)).concat(s).distinct(), name="inner")
        hopped = inner.join(jumps).map(lambda t: (t[1],))
        return inner.concat(hopped, roots).threshold(lambda c: 1 if c > 0 else 0)
    return roots.iterate(outer, name="outer")


def nested_oracle(roots, edges, jumps):
    def outer(s):
        inner = O.fixpoint(s, lambda r: O.distinct(O.add(O.fmap(O.join(r, edges), lambda t: (t[1],)), s)))
        hopped = O.fmap(O.join(inner, jumps), lambda t: (t[1],))
        return O.threshold(O.add(inner, hopped, roots), lambda c: 1 if c > 0 else 0)
    got = O.fixpoint(roots, outer)
    assert got == reach_oracle(roots, O.add(edges, jumps))  # sanity of the mirror
    return got


@LOOP_EXAMPLES
@given(nonneg_schedules({"roots": NODE, "edges": EDGE, "jumps": EDGE}, max_updates=30))
def test_nested_iterate(schedule):
    run_scenario(["roots", "edges", "jumps"], nested_dataflow, nested_oracle, schedule)


def nested_count_dataflow(edges):
    """An inner loop whose result feeds a count and a max in the outer body.

    Outer variable: (node, level) pairs; body: for every source node, the
    number of distinct nodes it reaches (an inner loop over (origin, node)
    pairs) capped at 3.  Reduces run at depth 3 (the general path).
    """
    starts = edges.project(0).distinct()

    def outer(v):
        seeds = v.project(0).map(lambda r: (r[0], r[0]))  # (origin, node)
        # reach pairs (origin, node) by walking edges: rekey on node to join.
        reach = seeds.iterate(
            lambda r: r.map(lambda t: (t[1], t[0])).join(edges).map(lambda t: (t[1], t[2])).concat(seeds).distinct(),
            name="pairs")
        cnt = reach.project(0).count()  # (origin, #reached)
        return cnt.map(lambda t: (t[0], min(t[1], 3))).concat(starts.map(lambda r: (r[0], 0))).max()
    return starts.map(lambda r: (r[0], 0)).iterate(outer, name="levels")


def nested_count_oracle(edges):
    starts = O.distinct(O.project(edges, 0))

    def outer(v):
        seeds = O.fmap(O.project(v, 0), lambda r: (r[0], r[0]))
        reach = O.fixpoint(seeds, lambda r: O.distinct(O.add(
            O.fmap(O.join(O.fmap(r, lambda t: (t[1], t[0])), edges), lambda t: (t[1], t[2])), seeds)))
        cnt = O.count(O.project(reach, 0))
        return O.smax(O.add(O.fmap(cnt, lambda t: (t[0], min(t[1], 3))), O.fmap(starts, lambda r: (r[0], 0))))
    return O.fixpoint(O.fmap(starts, lambda r: (r[0], 0)), outer)


@LOOP_EXAMPLES
@given(nonneg_schedules({"edges": EDGE}, max_updates=25))
def test_nested_iterate_with_count(schedule):
    run_scenario(["edges"], nested_count_dataflow, nested_count_oracle, schedule)


# -- mutual recursion via Variable ----------------------------------------------------------------------


def parity_dataflow(roots, edges):
    """Nodes reachable from a root by a path of even length, and of odd length."""
    scope = roots.iterative("parity")
    even = ddflow.Variable(scope, roots)
    odd = ddflow.Variable(scope, roots.filter(lambda r: False))
    even.set(odd.join(edges).map(lambda t: (t[1],)).concat(roots).distinct())
    odd.set(even.join(edges).map(lambda t: (t[1],)).distinct())
    return even.result.leave().map(lambda r: (r[0], 0)).concat(odd.result.leave().map(lambda r: (r[0], 1)))


def parity_oracle(roots, edges):
    def step(pair):
        even, odd = pair
        return (O.distinct(O.add(O.fmap(O.join(odd, edges), lambda t: (t[1],)), roots)),
                O.distinct(O.fmap(O.join(even, edges), lambda t: (t[1],))))
    pair = (roots, {})
    while True:
        nxt = step(pair)
        if nxt == pair:
            break
        pair = nxt
    even, odd = pair
    return O.add(O.fmap(even, lambda r: (r[0], 0)), O.fmap(odd, lambda r: (r[0], 1)))


@LOOP_EXAMPLES
@given(nonneg_schedules(GRAPH, max_updates=30))
def test_mutual_recursion_even_odd(schedule):
    run_scenario(["roots", "edges"], parity_dataflow, parity_oracle, schedule)


def test_mutual_recursion_example():
    flow = ddflow.Dataflow()
    hr, roots = flow.new_collection("roots")
    he, edges = flow.new_collection("edges")
    cap = parity_dataflow(roots, edges).capture()
    hr.insert((0,), 0)
    he.update([(0, 1), (1, 2), (2, 3)], 0)
    he.insert((3, 0), 3)  # a cycle of length 4: still even/odd separated
    he.insert((2, 0), 5)  # a cycle of length 3: everything becomes both
    flow.advance_to(6)
    flow.run()
    assert cap.contents(0) == {(0, 0): 1, (1, 1): 1, (2, 0): 1, (3, 1): 1}
    assert cap.contents(3) == cap.contents(0)
    assert cap.contents(5) == {(n, p): 1 for n in range(4) for p in (0, 1)}


# -- degenerate loops ---------------------------------------------------------------------------------


@EXAMPLES
@given(schedules({"a": int_rows(2), "b": int_rows(2)}))
def test_degenerate_loop_bodies(schedule):
    """A body returning its variable, or only an outer collection: the fixed points are a and b."""
    def build(a, b):
        same = a.iterate(lambda v: v)
        outer = a.iterate(lambda v: b)
        return same.map(lambda r: (0, *r)).concat(outer.map(lambda r: (1, *r)))
    run_scenario(["a", "b"], build,
                 lambda a, b: O.add(O.fmap(a, lambda r: (0, *r)), O.fmap(b, lambda r: (1, *r))), schedule)


@EXAMPLES
@given(schedules({"a": int_rows(2, 0, 40)}))
def test_loop_variable_is_replaced_each_round(schedule):
    """x(i+1) = body(x(i)), not body(x(i)) + x(0): halving values converges to zero, not to everything seen."""
    body = lambda x: x.map(lambda r: (r[0] // 2, r[1])).distinct()
    run_scenario(["a"], lambda a: a.iterate(body),
                 lambda a: O.fixpoint(a, lambda x: O.distinct(O.fmap(x, lambda r: (r[0] // 2, r[1])))), schedule)


def test_huge_data_times_and_finish():
    """Data times near the int64 limit (e.g. nanoseconds) keep full resolution through a loop."""
    flow = ddflow.Dataflow()
    hr, roots = flow.new_collection("roots")
    he, edges = flow.new_collection("edges")
    cap = reach_dataflow(roots, edges).capture()
    cnt = edges.count().capture()
    base = 2 ** 62
    hr.insert((0,), time=base)
    he.update([(0, 1), (1, 2)], [base + 1, base + 2])
    he.remove((0, 1), time=2 ** 63 - 2)
    flow.advance_to(base + 2)
    flow.run()
    assert cap.contents(base + 1) == {(0,): 1, (1,): 1}
    assert cap.contents(base - 1) == {}
    flow.finish()
    assert cap.contents(base + 2) == {(0,): 1, (1,): 1, (2,): 1}
    assert cap.contents(2 ** 63 - 2) == {(0,): 1}
    assert [t for _, t, _ in cap.changes()] == [base, base + 1, base + 2, 2 ** 63 - 2, 2 ** 63 - 2]
    assert cnt.contents(2 ** 63 - 2) == {(1, 2, 1): 1}


# -- resolution: one batch of K data times == K runs -------------------------------------------------------


def _changes_by_batching(build, inputs, updates, cuts, workers=1):
    """Output changes when ``updates`` (name, row, time, diff) are retired at the frontiers ``cuts``."""
    with ddflow.Dataflow(workers=workers) as flow:
        return _changes_of(flow, build, inputs, updates, cuts)


def _changes_of(flow, build, inputs, updates, cuts):
    handles, colls = {}, []
    for name in inputs:
        handles[name], c = flow.new_collection(name)
        colls.append(c)
    cap = build(*colls).capture()
    pending = sorted(updates, key=lambda u: u[2])
    for f in cuts:
        now = [u for u in pending if u[2] < f]
        pending = [u for u in pending if u[2] >= f]
        for name in inputs:
            mine = [u for u in now if u[0] == name]
            if mine:
                handles[name].update([u[1] for u in mine], [u[2] for u in mine], [u[3] for u in mine])
        flow.advance_to(f)
        flow.run()
    return cap.changes()


@st.composite
def distinct_time_updates(draw, inputs, nonneg):
    """K updates at K distinct data times, and a random partition of the times into runs."""
    k = draw(st.integers(1, 30))
    times = sorted(draw(st.sets(st.integers(0, 200), min_size=k, max_size=k)))
    names = list(inputs)
    ups, live = [], []
    for t in times:
        if nonneg and live and draw(st.integers(0, 2)) == 0:
            name, row = live.pop(draw(st.integers(0, len(live) - 1)))
            ups.append((name, row, t, -1))
        else:
            name = draw(st.sampled_from(names))
            row = draw(inputs[name])
            d = 1 if nonneg else draw(st.sampled_from([1, -1, 2]))
            ups.append((name, row, t, d))
            if d == 1:
                live.append((name, row))
    cuts = sorted(draw(st.sets(st.sampled_from(times), max_size=k)) | {201})
    return ups, times, cuts


def _check_resolution(build, inputs, drawn):
    ups, times, cuts = drawn
    one_batch = _changes_by_batching(build, inputs, ups, [201])
    per_time = _changes_by_batching(build, inputs, ups, [t + 1 for t in times] + [201])
    some = _changes_by_batching(build, inputs, ups, cuts)
    assert one_batch == per_time
    assert some == per_time
    # Many data times per message time on several workers: still every update's own change.
    assert _changes_by_batching(build, inputs, ups, [201], workers=3) == per_time
    assert _changes_by_batching(build, inputs, ups, cuts, workers=2) == per_time
    # Full resolution: every output change sits at the data time of an input change.
    assert {t for _, t, _ in one_batch} <= set(times)


@LOOP_EXAMPLES
@given(distinct_time_updates(GRAPH, nonneg=True))
def test_resolution_reachability(drawn):
    _check_resolution(reach_dataflow, ["roots", "edges"], drawn)


@EXAMPLES
@given(distinct_time_updates({"a": int_rows(2, 0, 3)}, nonneg=False))
def test_resolution_count(drawn):
    _check_resolution(lambda a: a.count(), ["a"], drawn)


@EXAMPLES
@given(distinct_time_updates({"a": int_rows(2, 0, 3), "b": int_rows(2, 0, 3)}, nonneg=False))
def test_resolution_join_count(drawn):
    _check_resolution(lambda a, b: a.join(b).count(), ["a", "b"], drawn)


@LOOP_EXAMPLES
@given(distinct_time_updates(GRAPH, nonneg=True))
def test_resolution_mutual_recursion(drawn):
    _check_resolution(parity_dataflow, ["roots", "edges"], drawn)


@LOOP_EXAMPLES
@given(distinct_time_updates({"edges": EDGE}, nonneg=True), st.booleans())
def test_resolution_kcore(drawn, use_threshold):
    _check_resolution(lambda e: kcore_dataflow(e, use_threshold), ["edges"], drawn)


# -- bounded state -----------------------------------------------------------------------------------


def test_sliding_window_reachability_state_is_bounded():
    """2e4 updates through reachability, a window of 100 live edges on 50 nodes: state stays bounded."""
    rng = random.Random(7)
    n_nodes, window, total, batch = 50, 100, 20_000, 100
    flow = ddflow.Dataflow()
    hr, roots = flow.new_collection("roots")
    he, edges = flow.new_collection("edges")
    cap = reach_dataflow(roots, edges).capture()
    hr.insert((0,), time=0)
    live: list[tuple[int, int]] = []
    out: dict[tuple, int] = {}
    t = 0
    sizes = []
    rows, times, diffs = [], [], []
    for i in range(total):
        t += 1
        if len(live) >= window:
            rows.append(live.pop(0))
            times.append(t)
            diffs.append(-1)
        e = (rng.randrange(n_nodes), rng.randrange(n_nodes))
        live.append(e)
        rows.append(e)
        times.append(t)
        diffs.append(1)
        if (i + 1) % batch == 0:
            he.update(rows, times, diffs)
            rows, times, diffs = [], [], []
            flow.advance_to(t + 1)
            flow.run()
            # The capture is the consumer's buffer, not the dataflow's state: drain it as a consumer would.
            for row, _, d in cap.drain():
                out[row] = out.get(row, 0) + d
            if (i + 1) % (total // 20) == 0:
                sizes.append(flow.trace_size())
    # Still right at the end: reachability from 0 over the live window.
    assert O.clean(out) == reach_oracle({(0,): 1}, O.add(*({e: 1} for e in live)))
    # Sizes swing with the spine's merge schedule (unmerged batches hold updates that later cancel),
    # so compare against the largest size seen in the first quarter.
    quarter = max(sizes[: len(sizes) // 4 + 1])
    assert sizes[-1] <= 2 * quarter, f"trace size grew from {quarter} to {sizes[-1]}: {sizes}"
    assert max(sizes[len(sizes) // 2:]) <= 2 * quarter, f"trace size grew from {quarter}: {sizes}"
    # 100 live edges and <= 50 reachable nodes: a few thousand updates at most, not 2e4 or more.
    assert max(sizes) < 6_000, sizes
