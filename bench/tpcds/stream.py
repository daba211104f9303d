"""Random inserts and deletes of the six sales and returns tables: the TPC-DS update stream of the check and the benchmark.

A random part of each fact table's dsdgen rows (``hold``, 2% by default)
is held back from the initial load as a pool.  Each refresh deletes
``fraction`` of a table's rows (at least one), drawn from the rows now
present, and inserts as many drawn from the pool; deleted rows go back to
the pool, so the stream never ends and every inserted row is a real
dsdgen row (consistent keys and values).  Rows are unique by their
table's key (item and ticket or order number), which DuckDB's side
deletes by.  Draws depend only on the seed.

>>> import pyarrow as pa
>>> t = pa.table({"ss_item_sk": list(range(100)), "ss_ticket_number": [1] * 100})
>>> c = Churn({"store_sales": t}, hold=0.1, seed=1)
>>> c.initial()["store_sales"].num_rows
90
>>> r = c.refresh(0.05)
>>> r.inserts["store_sales"].num_rows, r.deletes["store_sales"].num_rows
(5, 5)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

#: The tables the stream changes, with the columns that make a row's key.
KEYS: dict[str, tuple[str, str]] = {
    "store_sales": ("ss_item_sk", "ss_ticket_number"),
    "catalog_sales": ("cs_item_sk", "cs_order_number"),
    "web_sales": ("ws_item_sk", "ws_order_number"),
    "store_returns": ("sr_item_sk", "sr_ticket_number"),
    "catalog_returns": ("cr_item_sk", "cr_order_number"),
    "web_returns": ("wr_item_sk", "wr_order_number"),
}


@dataclass
class Refresh:
    """One refresh: per table, the rows it inserts and the rows it deletes."""

    inserts: dict[str, pa.Table]
    deletes: dict[str, pa.Table]

    def rows(self) -> int:
        return sum(t.num_rows for t in self.inserts.values()) + sum(t.num_rows for t in self.deletes.values())


class Churn:
    """The fact tables' rows, which of them are present, and random refreshes that change that.

    Cost: a refresh is O(rows it changes) (numpy draws and Arrow ``take``).
    """

    def __init__(self, tables: dict[str, pa.Table], hold: float = 0.02, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.tables = {n: t for n, t in tables.items() if n in KEYS}
        self.present: dict[str, np.ndarray] = {}
        self.pool: dict[str, np.ndarray] = {}
        for n, t in self.tables.items():
            a, b = (t.column(c).to_numpy(zero_copy_only=False) for c in KEYS[n])
            if len(np.unique(np.stack([a, b], axis=1), axis=0)) != t.num_rows:
                raise ValueError(f"{n}'s rows are not unique by {KEYS[n]}: DuckDB's deletes by key would be wrong")
            order = self.rng.permutation(t.num_rows)
            k = int(round(hold * t.num_rows))
            self.pool[n] = order[:k]
            self.present[n] = np.sort(order[k:])

    def initial(self) -> dict[str, pa.Table]:
        """The fact tables as first loaded (without the pool)."""
        return {n: self.tables[n].take(self.present[n]) for n in self.tables}

    def refresh(self, fraction: float) -> Refresh:
        """Delete ``fraction`` of each table's present rows and insert as many from its pool."""
        ins, dels = {}, {}
        for n, t in self.tables.items():
            present, pool = self.present[n], self.pool[n]
            k = min(max(1, int(round(fraction * t.num_rows))), len(pool), len(present))
            di = self.rng.choice(len(present), size=k, replace=False)
            ii = self.rng.choice(len(pool), size=k, replace=False)
            gone, new = present[di], pool[ii]
            keep_p = np.ones(len(present), bool)
            keep_p[di] = False
            keep_q = np.ones(len(pool), bool)
            keep_q[ii] = False
            self.present[n] = np.concatenate([present[keep_p], new])
            self.pool[n] = np.concatenate([pool[keep_q], gone])
            ins[n] = t.take(np.sort(new))
            dels[n] = t.take(np.sort(gone))
        return Refresh(ins, dels)
