"""The eight TPC-H tables at any scale factor, and the refresh functions RF1/RF2, as typed Arrow tables.

Vectorized (numpy) and deterministic by seed; a table's rows depend only on
the scale factor and the seed (each table draws from its own random stream).
The cardinalities, key formulas and value domains are dbgen's:

* SUPPLIER SF*10,000, PART SF*200,000, PARTSUPP 4 per part (dbgen's supplier
  formula), CUSTOMER SF*150,000, ORDERS SF*1,500,000 with sparse keys (8 of
  every 32), LINEITEM 1-7 per order, NATION 25, REGION 5.
* o_custkey never a multiple of 3 (a third of the customers have no orders);
  o_orderdate uniform in [1992-01-01, 1998-12-31 - 151 days]; l_shipdate =
  orderdate + [1, 121], l_commitdate = orderdate + [30, 90], l_receiptdate =
  shipdate + [1, 30]; l_returnflag 'R'/'A' if received by 1995-06-17 else 'N';
  l_linestatus 'O' if shipped after 1995-06-17 else 'F'; o_orderstatus 'F' or
  'O' when all its lines are, else 'P'; o_totalprice from its lines.
* p_name five colour words, p_type/p_container syllables, 'Brand#MN',
  retail price from the part key, phones '<nation+10>-ddd-ddd-dddd'.
* Comments are slices of a text pool made by dbgen's sentence grammar (so
  '%special%requests%' occurs in some o_comment); SF*5 supplier comments
  hold 'Customer ... Complaints' and SF*5 'Customer ... Recommends' (at
  least one of each at any scale, so Q16's NOT IN matters on tiny data).

Types are the spec's: identifiers and integers ``bigint``, money, quantity,
discount and tax ``decimal(15,2)``, dates ``date``, text ``string``.

>>> t = generate(0.001, seed=1)
>>> {n: t[n].num_rows for n in ("supplier", "part", "partsupp", "customer", "orders", "nation", "region")}
{'supplier': 10, 'part': 200, 'partsupp': 800, 'customer': 150, 'orders': 1500, 'nation': 25, 'region': 5}
>>> t["orders"].column("o_orderkey").to_pylist()[6:9]
[7, 32, 33]
>>> str(t["lineitem"].schema.field("l_extendedprice").type)
'decimal128(15, 2)'

The refresh stream alternates RF1 (insert SF*1,500 new orders, keys in the
unused part of the sparse key space, with their lines) and RF2 (delete
SF*1,500 of the initial orders with their lines, oldest keys first), each
one small enough to be applied at its own data time.
"""
from __future__ import annotations

import datetime
import random
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

MONEY = "decimal(15,2)"

#: Column name -> SQL type, per table, in the spec's column order.
SCHEMAS: dict[str, dict[str, str]] = {
    "region": {"r_regionkey": "bigint", "r_name": "string", "r_comment": "string"},
    "nation": {"n_nationkey": "bigint", "n_name": "string", "n_regionkey": "bigint", "n_comment": "string"},
    "supplier": {"s_suppkey": "bigint", "s_name": "string", "s_address": "string", "s_nationkey": "bigint",
                 "s_phone": "string", "s_acctbal": MONEY, "s_comment": "string"},
    "part": {"p_partkey": "bigint", "p_name": "string", "p_mfgr": "string", "p_brand": "string", "p_type": "string",
             "p_size": "bigint", "p_container": "string", "p_retailprice": MONEY, "p_comment": "string"},
    "partsupp": {"ps_partkey": "bigint", "ps_suppkey": "bigint", "ps_availqty": "bigint", "ps_supplycost": MONEY,
                 "ps_comment": "string"},
    "customer": {"c_custkey": "bigint", "c_name": "string", "c_address": "string", "c_nationkey": "bigint",
                 "c_phone": "string", "c_acctbal": MONEY, "c_mktsegment": "string", "c_comment": "string"},
    "orders": {"o_orderkey": "bigint", "o_custkey": "bigint", "o_orderstatus": "string", "o_totalprice": MONEY,
               "o_orderdate": "date", "o_orderpriority": "string", "o_clerk": "string", "o_shippriority": "bigint",
               "o_comment": "string"},
    "lineitem": {"l_orderkey": "bigint", "l_partkey": "bigint", "l_suppkey": "bigint", "l_linenumber": "bigint",
                 "l_quantity": MONEY, "l_extendedprice": MONEY, "l_discount": MONEY, "l_tax": MONEY,
                 "l_returnflag": "string", "l_linestatus": "string", "l_shipdate": "date", "l_commitdate": "date",
                 "l_receiptdate": "date", "l_shipinstruct": "string", "l_shipmode": "string", "l_comment": "string"},
}
TABLES = tuple(SCHEMAS)

REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
NATIONS = [("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4), ("ETHIOPIA", 0),
           ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2), ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2),
           ("JORDAN", 4), ("KENYA", 0), ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2),
           ("ROMANIA", 3), ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3),
           ("UNITED STATES", 1)]
COLORS = ("almond antique aquamarine azure beige bisque black blanched blue blush brown burlywood burnished "
          "chartreuse chiffon chocolate coral cornflower cornsilk cream cyan dark deep dim dodger drab firebrick "
          "floral forest frosted gainsboro ghost goldenrod green grey honeydew hot indian ivory khaki lace "
          "lavender lawn lemon light lime linen magenta maroon medium metallic midnight mint misty moccasin navajo "
          "navy olive orange orchid pale papaya peach peru pink plum powder puff purple red rose rosy royal "
          "saddle salmon sandy seashell sienna sky slate smoke snow spring steel tan thistle tomato turquoise "
          "violet wheat white yellow").split()
TYPE_S1 = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"]
TYPE_S2 = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"]
TYPE_S3 = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"]
CONTAINER_S1 = ["SM", "LG", "MED", "JUMBO", "WRAP"]
CONTAINER_S2 = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"]
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
SHIPINSTRUCT = ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"]
SHIPMODES = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"]

EPOCH = datetime.date(1970, 1, 1)
START = (datetime.date(1992, 1, 1) - EPOCH).days
END = (datetime.date(1998, 12, 31) - EPOCH).days
CURRENT = (datetime.date(1995, 6, 17) - EPOCH).days
ORDER_DATE_MAX = END - 151  # the last order date whose lines all ship and arrive by END

#: dbgen's text grammar: words by part of speech.
_NOUNS = ("foxes ideas theodolites pinto_beans instructions dependencies excuses platelets asymptotes courts "
          "dolphins multipliers sauternes warthogs frets dinos attainments somas Tiresias' patterns forges braids "
          "hockey_players frays warhorses dugouts notornis epitaphs pearls tithes waters orbits gifts sheaves depths "
          "sentiments decoys realms pains grouches escapades accounts packages requests deposits").split()
_VERBS = ("sleep wake are cajole haggle nag use boost affix detect integrate maintain nod was lose sublate solve "
          "thrash promise engage hinder print x-ray breach eat grow impress mold poach serve run dazzle snooze doze "
          "unwind kindle play hang believe doubt").split()
_ADJECTIVES = ("special pending unusual express furious sly careful blithe quick fluffy slow quiet ruthless thin "
               "close dogged daring brave stealthy permanent enticing idle busy regular final ironic even bold "
               "silent").split()
_ADVERBS = ("sometimes always never furiously slyly carefully blithely quickly fluffily slowly quietly ruthlessly "
            "thinly closely doggedly daringly bravely stealthily permanently enticingly idly busily regularly "
            "finally ironically evenly boldly silently").split()
_PREPOSITIONS = ("about above according_to across after against along alongside_of among around at atop before "
                 "behind beneath beside besides between beyond by despite during except for from in_place_of inside "
                 "instead_of into near of on outside over past since through throughout to toward under until up "
                 "upon without with within").split()
_AUXILIARIES = ("do may might shall will would can could should ought_to must will_have_to shall_have_to "
                "could_have_to should_have_to must_have_to need_to try_to").split()
_TERMINATORS = [".", ";", ":", "?", "!", "--"]
#: dbgen weights its words: a few are far more common (the rest weigh 1).
_WEIGHTS = {"packages": 40, "requests": 40, "accounts": 40, "deposits": 40, "foxes": 20, "ideas": 20,
            "theodolites": 20, "pinto_beans": 20, "instructions": 20, "dependencies": 10, "excuses": 10,
            "platelets": 10, "asymptotes": 10, "courts": 5, "dolphins": 5,
            "special": 20, "pending": 20, "unusual": 20, "express": 20, "regular": 50, "final": 40, "ironic": 40,
            "even": 30, "bold": 20, "silent": 10,
            "sleep": 20, "wake": 20, "are": 20, "cajole": 20, "haggle": 20, "nag": 10, "use": 10, "boost": 10,
            "affix": 5, "detect": 5, "integrate": 5,
            "furiously": 50, "slyly": 50, "carefully": 50, "blithely": 40, "quickly": 30, "fluffily": 20,
            "about": 50, "above": 50, "according_to": 50, "across": 50, "after": 50, "against": 40, "along": 40,
            "among": 30, "around": 20, "at": 10, "atop": 10, "before": 10, "behind": 10, "beneath": 10,
            "do": 1, "may": 1, "might": 1, "shall": 1, "will": 1, "would": 1, "can": 1, "could": 1, "should": 1}
#: Spec lengths [min, max] of each comment column (and of the addresses, random alphanumerics).
COMMENT_LEN = {"r": (31, 115), "n": (31, 114), "s": (25, 100), "p": (5, 22), "ps": (49, 198), "c": (29, 116),
               "o": (19, 78), "l": (10, 43)}
_ADDRESS_CHARS = np.frombuffer(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,", dtype=np.uint8)


def counts(sf: float) -> dict[str, int]:
    """Rows per table at scale factor ``sf`` (LINEITEM: about 4 per order, drawn)."""
    n = {"supplier": 10_000, "part": 200_000, "customer": 150_000, "orders": 1_500_000}
    out = {k: max(1, int(round(v * sf))) for k, v in n.items()}
    out["partsupp"] = 4 * out["part"]
    out.update(nation=25, region=5)
    return out


# -- columns ----------------------------------------------------------------------


def money(cents: np.ndarray) -> pa.Array:
    """A decimal(15,2) Arrow column from unscaled int64 cents (no float on the way)."""
    cents = np.ascontiguousarray(cents, dtype=np.int64)
    words = np.empty((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)
    return pa.Array.from_buffers(pa.decimal128(15, 2), len(cents), [None, pa.py_buffer(words.tobytes())])


def dates(days: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(days, dtype=np.int32), type=pa.date32())


def strings(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A string column from the concatenated bytes ``data`` and each value's length."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.large_string(), len(lengths),
                                 [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes())]).cast(pa.string())


def choice(words: list[str], idx: np.ndarray) -> pa.Array:
    """``words[idx]`` as a string column (a dictionary lookup, decoded)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(idx, dtype=np.int32)), pa.array(words)).cast(pa.string())


def numbered(prefix: str, keys: np.ndarray, width: int = 9) -> pa.Array:
    """'Supplier#000000001' style names."""
    digits = np.char.zfill(np.asarray(keys, dtype=np.int64).astype(str), width)
    return pa.array(np.char.add(prefix, digits).tolist(), type=pa.string())


def phones(rng: np.random.Generator, nation: np.ndarray) -> pa.Array:
    n = len(nation)
    parts = [np.asarray(nation) + 10, rng.integers(100, 1000, n), rng.integers(100, 1000, n), rng.integers(1000, 10000, n)]
    s = np.char.add(np.char.zfill(parts[0].astype(str), 2), "-")
    s = np.char.add(np.char.add(s, parts[1].astype(str)), "-")
    s = np.char.add(np.char.add(s, parts[2].astype(str)), "-")
    return pa.array(np.char.add(s, parts[3].astype(str)).tolist(), type=pa.string())


def addresses(rng: np.random.Generator, n: int) -> pa.Array:
    """dbgen's v-strings: 10 to 40 random characters."""
    lengths = rng.integers(10, 41, n)
    return strings(_ADDRESS_CHARS[rng.integers(0, len(_ADDRESS_CHARS), int(lengths.sum()))], lengths)


_POOLS: dict[int, np.ndarray] = {}


_CUM = {id(ws): list(np.cumsum([_WEIGHTS.get(w, 1) for w in ws]))
        for ws in (_NOUNS, _VERBS, _ADJECTIVES, _ADVERBS, _PREPOSITIONS, _AUXILIARIES)}


def text_pool(seed: int, size: int = 1 << 20) -> np.ndarray:
    """About ``size`` bytes of sentences from dbgen's grammar (dbgen slices its comments from such a pool)."""
    if seed not in _POOLS:
        r = random.Random(seed)

        def pick(words: list[str]) -> str:
            return r.choices(words, cum_weights=_CUM[id(words)])[0]

        def noun_phrase() -> str:
            form = r.randrange(4)
            noun = pick(_NOUNS)
            if form == 0:
                return noun
            if form == 1:
                return f"{pick(_ADJECTIVES)} {noun}"
            if form == 2:
                return f"{pick(_ADJECTIVES)}, {pick(_ADJECTIVES)} {noun}"
            return f"{pick(_ADVERBS)} {pick(_ADJECTIVES)} {noun}"

        def verb_phrase() -> str:
            form = r.randrange(4)
            verb = pick(_VERBS)
            return [verb, f"{pick(_AUXILIARIES)} {verb}", f"{verb} {pick(_ADVERBS)}",
                    f"{pick(_AUXILIARIES)} {verb} {pick(_ADVERBS)}"][form]

        def prep_phrase() -> str:
            return f"{pick(_PREPOSITIONS)} the {noun_phrase()}"

        out, total = [], 0
        while total < size:
            form = r.randrange(5)
            body = [f"{noun_phrase()} {verb_phrase()}", f"{noun_phrase()} {verb_phrase()} {prep_phrase()}",
                    f"{noun_phrase()} {verb_phrase()} {noun_phrase()}",
                    f"{noun_phrase()} {prep_phrase()} {verb_phrase()} {noun_phrase()}",
                    f"{noun_phrase()} {prep_phrase()} {verb_phrase()} {prep_phrase()}"][form]
            s = body.replace("_", " ") + r.choice(_TERMINATORS) + " "
            out.append(s)
            total += len(s)
        _POOLS[seed] = np.frombuffer("".join(out).encode("ascii"), dtype=np.uint8)
    return _POOLS[seed]


def comments(rng: np.random.Generator, n: int, table: str, seed: int) -> pa.Array:
    """Random slices of the text pool, of the spec's length range for ``table``'s comments."""
    pool = text_pool(seed)
    lo, hi = COMMENT_LEN[table]
    lengths = rng.integers(lo, hi + 1, n)
    starts = rng.integers(0, len(pool) - hi, n)
    offsets = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    idx = np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))
    return strings(pool[idx], lengths)


def order_key(index: np.ndarray, seq: int = 0) -> np.ndarray:
    """dbgen's sparse order keys: index i (from 1) keeps its low 3 bits, bits 3-4 hold the refresh stream ``seq``."""
    index = np.asarray(index, dtype=np.int64)
    return ((index >> 3) << 5) | (seq << 3) | (index & 7)


def part_supplier(partkey: np.ndarray, i: np.ndarray | int, suppliers: int) -> np.ndarray:
    """The i-th (0-3) supplier of a part: dbgen's PARTSUPP formula (LINEITEM uses it too).

    Below SF 0.01 dbgen's stride can repeat a supplier among a part's four
    (its (partkey, suppkey) key would not be unique); such a part strides
    by ``suppliers // 4`` instead.  At SF >= 0.01 the formula is dbgen's.
    """
    partkey = np.asarray(partkey, dtype=np.int64)
    step = suppliers // 4 + (partkey - 1) // suppliers
    repeats = np.zeros(len(partkey), dtype=bool)
    for d in (1, 2, 3):
        repeats |= (d * step) % suppliers == 0
    step = np.where(repeats, suppliers // 4, step)
    return (partkey + i * step) % suppliers + 1


def retail_cents(partkey: np.ndarray) -> np.ndarray:
    partkey = np.asarray(partkey, dtype=np.int64)
    return 90000 + (partkey // 10) % 20001 + 100 * (partkey % 1000)


# -- tables ----------------------------------------------------------------------


def _streams(seed: int) -> dict[str, np.random.Generator]:
    names = ["region", "nation", "supplier", "part", "partsupp", "customer", "orders", "refresh"]
    return {n: np.random.default_rng(s) for n, s in zip(names, np.random.SeedSequence(seed).spawn(len(names)))}


def _table(name: str, cols: dict) -> pa.Table:
    schema = SCHEMAS[name]
    assert list(cols) == list(schema), (name, list(cols))
    return pa.table(cols)


def orders_and_lines(rng: np.random.Generator, keys: np.ndarray, n: dict[str, int], seed: int) -> tuple[pa.Table, pa.Table]:
    """ORDERS rows with ``keys`` and their 1-7 LINEITEM rows each (the base load and RF1 both use it)."""
    k = len(keys)
    valid = n["customer"] - n["customer"] // 3  # customer keys that are not multiples of 3
    c = rng.integers(0, max(valid, 1), k)
    custkey = 3 * (c // 2) + 1 + c % 2
    odate = rng.integers(START, ORDER_DATE_MAX + 1, k)
    nlines = rng.integers(1, 8, k)
    m = int(nlines.sum())
    owner = np.repeat(np.arange(k), nlines)
    first = np.zeros(k, dtype=np.int64)
    np.cumsum(nlines[:-1], out=first[1:])
    linenumber = np.arange(m) - first[owner] + 1
    partkey = rng.integers(1, n["part"] + 1, m)
    suppkey = part_supplier(partkey, rng.integers(0, 4, m), n["supplier"])
    quantity = rng.integers(1, 51, m)
    ext = quantity * retail_cents(partkey)
    disc = rng.integers(0, 11, m)
    tax = rng.integers(0, 9, m)
    ship = odate[owner] + rng.integers(1, 122, m)
    commit = odate[owner] + rng.integers(30, 91, m)
    receipt = ship + rng.integers(1, 31, m)
    returned = rng.integers(0, 2, m)
    rflag = np.where(receipt <= CURRENT, returned, 2)  # R, A, N
    lstatus = (ship > CURRENT).astype(np.int64)  # F, O
    # o_totalprice: each line's extendedprice * (1 - discount) * (1 + tax), in cents, rounded as dbgen does
    line_total = (ext * (100 - disc) // 100) * (100 + tax) // 100
    total = np.bincount(owner, weights=line_total, minlength=k).astype(np.int64)
    open_lines = np.bincount(owner, weights=lstatus, minlength=k)
    status = np.where(open_lines == 0, 0, np.where(open_lines == nlines, 1, 2))  # F, O, P
    orders = _table("orders", {
        "o_orderkey": pa.array(keys, pa.int64()), "o_custkey": pa.array(custkey, pa.int64()),
        "o_orderstatus": choice(["F", "O", "P"], status), "o_totalprice": money(total), "o_orderdate": dates(odate),
        "o_orderpriority": choice(PRIORITIES, rng.integers(0, 5, k)),
        "o_clerk": numbered("Clerk#", rng.integers(1, max(1, int(round(n["orders"] / 1500))) + 1, k)),
        "o_shippriority": pa.array(np.zeros(k, dtype=np.int64)), "o_comment": comments(rng, k, "o", seed)})
    lines = _table("lineitem", {
        "l_orderkey": pa.array(np.asarray(keys)[owner], pa.int64()), "l_partkey": pa.array(partkey),
        "l_suppkey": pa.array(suppkey), "l_linenumber": pa.array(linenumber), "l_quantity": money(quantity * 100),
        "l_extendedprice": money(ext), "l_discount": money(disc), "l_tax": money(tax),
        "l_returnflag": choice(["R", "A", "N"], rflag), "l_linestatus": choice(["F", "O"], lstatus),
        "l_shipdate": dates(ship), "l_commitdate": dates(commit), "l_receiptdate": dates(receipt),
        "l_shipinstruct": choice(SHIPINSTRUCT, rng.integers(0, 4, m)),
        "l_shipmode": choice(SHIPMODES, rng.integers(0, 7, m)), "l_comment": comments(rng, m, "l", seed)})
    return orders, lines


def _supplier_comments(rng: np.random.Generator, n: int, sf: float, seed: int) -> pa.Array:
    """Supplier comments, SF*5 of them holding 'Customer ... Complaints' and SF*5 'Customer ... Recommends'."""
    base = comments(rng, n, "s", seed).to_pylist()
    special = max(1, int(round(5 * sf)))
    rows = rng.choice(n, size=min(n, 2 * special), replace=False)
    for j, row in enumerate(rows.tolist()):
        word = "Complaints" if j % 2 == 0 else "Recommends"
        text = base[row]
        phrase = f"Customer {'x' * int(rng.integers(0, 8))}{word}"
        at = int(rng.integers(0, max(1, len(text) - len(phrase)) + 1))
        base[row] = (text[:at] + phrase + text[at + len(phrase):])[:max(len(text), len(phrase))]
    return pa.array(base, type=pa.string())


def generate(sf: float, seed: int = 0) -> dict[str, pa.Table]:
    """The eight tables at scale factor ``sf`` (any positive number; 1 is about 8.7 M rows)."""
    n = counts(sf)
    rs = _streams(seed)
    out: dict[str, pa.Table] = {}
    r = rs["region"]
    out["region"] = _table("region", {"r_regionkey": pa.array(np.arange(5, dtype=np.int64)),
                                      "r_name": pa.array(REGIONS), "r_comment": comments(r, 5, "r", seed)})
    r = rs["nation"]
    out["nation"] = _table("nation", {
        "n_nationkey": pa.array(np.arange(25, dtype=np.int64)), "n_name": pa.array([x for x, _ in NATIONS]),
        "n_regionkey": pa.array([g for _, g in NATIONS], pa.int64()), "n_comment": comments(r, 25, "n", seed)})
    r = rs["supplier"]
    k = n["supplier"]
    skeys = np.arange(1, k + 1, dtype=np.int64)
    snation = r.integers(0, 25, k)
    out["supplier"] = _table("supplier", {
        "s_suppkey": pa.array(skeys), "s_name": numbered("Supplier#", skeys), "s_address": addresses(r, k),
        "s_nationkey": pa.array(snation), "s_phone": phones(r, snation),
        "s_acctbal": money(r.integers(-99999, 1000000, k)), "s_comment": _supplier_comments(r, k, sf, seed)})
    r = rs["part"]
    k = n["part"]
    pkeys = np.arange(1, k + 1, dtype=np.int64)
    # p_name: five distinct colour words
    words = np.argsort(r.random((k, len(COLORS))), axis=1)[:, :5]
    names = np.asarray(COLORS, dtype=object)[words]
    mfgr = r.integers(1, 6, k)
    out["part"] = _table("part", {
        "p_partkey": pa.array(pkeys), "p_name": pa.array([" ".join(w) for w in names.tolist()], pa.string()),
        "p_mfgr": choice([f"Manufacturer#{i}" for i in range(1, 6)], mfgr - 1),
        "p_brand": choice([f"Brand#{i}{j}" for i in range(1, 6) for j in range(1, 6)],
                          (mfgr - 1) * 5 + r.integers(0, 5, k)),
        "p_type": choice([f"{a} {b} {c}" for a in TYPE_S1 for b in TYPE_S2 for c in TYPE_S3],
                         r.integers(0, len(TYPE_S1) * len(TYPE_S2) * len(TYPE_S3), k)),
        "p_size": pa.array(r.integers(1, 51, k)),
        "p_container": choice([f"{a} {b}" for a in CONTAINER_S1 for b in CONTAINER_S2],
                              r.integers(0, len(CONTAINER_S1) * len(CONTAINER_S2), k)),
        "p_retailprice": money(retail_cents(pkeys)), "p_comment": comments(r, k, "p", seed)})
    r = rs["partsupp"]
    m = 4 * k
    pspart = np.repeat(pkeys, 4)
    out["partsupp"] = _table("partsupp", {
        "ps_partkey": pa.array(pspart), "ps_suppkey": pa.array(part_supplier(pspart, np.tile(np.arange(4), k),
                                                                             n["supplier"])),
        "ps_availqty": pa.array(r.integers(1, 10000, m)), "ps_supplycost": money(r.integers(100, 100001, m)),
        "ps_comment": comments(r, m, "ps", seed)})
    r = rs["customer"]
    k = n["customer"]
    ckeys = np.arange(1, k + 1, dtype=np.int64)
    cnation = r.integers(0, 25, k)
    out["customer"] = _table("customer", {
        "c_custkey": pa.array(ckeys), "c_name": numbered("Customer#", ckeys), "c_address": addresses(r, k),
        "c_nationkey": pa.array(cnation), "c_phone": phones(r, cnation),
        "c_acctbal": money(r.integers(-99999, 1000000, k)), "c_mktsegment": choice(SEGMENTS, r.integers(0, 5, k)),
        "c_comment": comments(r, k, "c", seed)})
    out["orders"], out["lineitem"] = orders_and_lines(rs["orders"], order_key(np.arange(1, n["orders"] + 1)), n, seed)
    return {t: out[t] for t in TABLES}


def schemas(money: str = MONEY) -> dict[str, dict[str, str]]:
    """:data:`SCHEMAS` with the money columns typed ``money`` (``double`` stands in where decimals are missing)."""
    return {t: {c: money if ty == MONEY else ty for c, ty in cols.items()} for t, cols in SCHEMAS.items()}


def retype(table: pa.Table, money: str = MONEY) -> pa.Table:
    """``table`` with its decimal(15,2) columns cast to float64 when ``money`` is ``double``."""
    if money == MONEY:
        return table
    assert money == "double", money
    cols = [c.cast(pa.float64()) if pa.types.is_decimal(c.type) else c for c in table.columns]
    return pa.table(cols, names=table.column_names)


# -- refresh functions ----------------------------------------------------------------------


@dataclass
class Refresh:
    """One refresh function's changes: RF1 inserts these rows, RF2 deletes them."""

    kind: str  # "RF1" or "RF2"
    orders: pa.Table
    lineitem: pa.Table

    @property
    def diff(self) -> int:
        return 1 if self.kind == "RF1" else -1

    def tables(self) -> dict[str, pa.Table]:
        return {"orders": self.orders, "lineitem": self.lineitem}


def refreshes(tables: dict[str, pa.Table], sf: float, seed: int = 0,
              orders_per_refresh: int | None = None) -> Iterator[Refresh]:
    """RF1, RF2, RF1, RF2, ...: each inserts (deletes) SF*1,500 orders with their lines.

    RF1's keys are new: the sparse key space's unused stream ``seq`` 1-3
    (bits 3-4 of the key), never a key of the initial load.  RF2 deletes
    initial orders, lowest keys first, as dbgen's delete sets do; it never
    deletes what an RF1 inserted, so the stream ends when the initial
    orders are used up.
    """
    n = counts(sf)
    per = orders_per_refresh or max(1, int(round(sf * 1500)))
    rng = _streams(seed)["refresh"]
    orders, lines = tables["orders"], tables["lineitem"]
    line_keys = lines.column("l_orderkey").to_numpy()
    inserted = deleted = 0
    while deleted + per <= orders.num_rows and inserted + per <= 3 * n["orders"]:
        idx = np.arange(inserted, inserted + per)
        keys = order_key(idx % n["orders"] + 1, 1 + idx // n["orders"])
        inserted += per
        yield Refresh("RF1", *orders_and_lines(rng, keys, n, seed))
        gone = orders.slice(deleted, per)
        keys = gone.column("o_orderkey").to_numpy()
        lo = int(np.searchsorted(line_keys, keys[0], side="left"))
        hi = int(np.searchsorted(line_keys, keys[-1], side="right"))
        deleted += per
        yield Refresh("RF2", gone, lines.slice(lo, hi - lo))
