"""Microbenchmarks of the foundations: consolidation, batch merge, trace seek, bytes per update.

Run with ``.venv/bin/python -m pytest bench/test_micro_foundations.py --benchmark-only``.
Benchmarks measure; nothing here fails because a machine is slow. Results are
recorded in ``benchmark.extra_info`` (and printed, ``-s`` to see them).
"""
from __future__ import annotations

import numpy as np
import pytest

from ddflow.base.consolidate import consolidate
from ddflow.base.lattice import Antichain
from ddflow.base.updates import Updates
from ddflow.traces import Batch, Description, Trace

# Medians of finished benchmarks, for ratios between them (same session).
_MEDIANS: dict[str, float] = {}


def _updates(n: int, keys: int, t0: int, t1: int, seed: int) -> Updates:
    """n updates (int64 key, int64 val, depth-1 time, diff)."""
    rng = np.random.default_rng(seed)
    return Updates(
        (rng.integers(0, keys, n), rng.integers(0, 100, n)),
        rng.integers(t0, t1, n).reshape(-1, 1),
        rng.choice(np.array([-1, 1]), n),
        ("i", "i"),
    )


def _median(benchmark) -> float:
    return float(benchmark.stats.stats.median)


def test_consolidate_1e6(benchmark):
    u = _updates(1_000_000, 1_000_000, 0, 1000, seed=1)
    out = benchmark(consolidate, u)
    assert 0 < len(out) <= len(u)
    med = _median(benchmark)
    benchmark.extra_info.update(updates=len(u), ns_per_update=med / len(u) * 1e9)
    print(f"\nconsolidate 1e6: median {med * 1e3:.1f} ms ({med / len(u) * 1e9:.0f} ns/update)")


def _two_batches(n: int) -> tuple[Batch, Batch]:
    a = Batch.from_updates(_updates(n, n, 0, 1000, seed=2), Description(Antichain([0]), Antichain([1000]), Antichain([0])))
    b = Batch.from_updates(_updates(n, n, 1000, 2000, seed=3), Description(Antichain([1000]), Antichain([2000]), Antichain([0])))
    return a, b


@pytest.mark.parametrize("n", [1_000_000, 2_000_000], ids=["1e6", "2e6"])
def test_merge_two_batches(benchmark, n):
    """Merge two batches of n updates each, advancing times to a frontier inside the second."""
    a, b = _two_batches(n)
    frontier = Antichain([1500])
    out = benchmark(a.merge, b, frontier)
    assert len(out) <= len(a) + len(b)
    med = _median(benchmark)
    _MEDIANS[f"merge_{n}"] = med
    info = {"updates_per_batch": n, "ns_per_update": med / (2 * n) * 1e9}
    msg = f"\nmerge 2 x {n:.0e}: median {med * 1e3:.1f} ms ({med / (2 * n) * 1e9:.0f} ns/update)"
    if n == 2_000_000 and "merge_1000000" in _MEDIANS:
        ratio = med / _MEDIANS["merge_1000000"]
        info["ratio_vs_1e6"] = ratio
        msg += f"; ratio 2e6/1e6 = {ratio:.2f} (2.0 is linear)"
    benchmark.extra_info.update(info)
    print(msg)


def test_seek_1e4_keys_in_trace_of_1e6(benchmark):
    # 1e6 distinct keys, in a spine of several batches as insertion leaves it.
    tr = Trace(("i", "i"), 1)
    rng = np.random.default_rng(4)
    perm = rng.permutation(1_000_000)
    for i, part in enumerate(np.array_split(perm, 10)):
        u = Updates((part, part % 100), np.full((len(part), 1), i), np.ones(len(part), dtype=np.int64), ("i", "i"))
        tr.insert_updates(u, upper=Antichain([i + 1]))
    assert len(tr) == 1_000_000
    keys = np.unique(rng.integers(0, 1_000_000, 10_000))
    q, found = benchmark(tr.seek, keys)
    assert len(found) == len(keys)  # every key exists, one update each
    med = _median(benchmark)
    nb = len(list(tr.spine.batches()))
    benchmark.extra_info.update(keys=len(keys), batches=nb, us_per_key=med / len(keys) * 1e6)
    print(f"\nseek {len(keys)} keys in a trace of 1e6 keys ({nb} batches): median {med * 1e3:.2f} ms "
          f"({med / len(keys) * 1e6:.2f} us/key)")


@pytest.mark.parametrize("shape", ["distinct", "10_per_key_val"])
def test_bytes_per_update(benchmark, shape):
    """Bytes a trace holds per (key, val, time) update, against 32 raw bytes (key, val, time, diff)."""
    n = 1_000_000
    rng = np.random.default_rng(5)
    if shape == "distinct":
        key = rng.permutation(n)
        val = rng.integers(0, 100, n)
        t = np.zeros(n, dtype=np.int64)
    else:  # 1e5 (key, val) pairs with ten times each
        key = np.repeat(rng.permutation(100_000), 10)
        val = key % 100
        t = np.tile(np.arange(10), 100_000)
    u = Updates((key, val), t.reshape(-1, 1), np.ones(n, dtype=np.int64), ("i", "i"))

    def build() -> Trace:
        tr = Trace(("i", "i"), 1)
        tr.insert_updates(u, upper=Antichain([10]))
        return tr

    tr = benchmark.pedantic(build, rounds=3, iterations=1)
    assert len(tr) == n
    per = tr.nbytes / len(tr)
    benchmark.extra_info.update(bytes_per_update=per, raw_bytes_per_update=32, updates=len(tr))
    print(f"\nbytes per update ({shape}): {per:.1f} held vs 32 raw")
