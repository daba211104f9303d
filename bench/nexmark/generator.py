"""Nexmark's persons, auctions and bids as typed Arrow tables: vectorized, deterministic by seed, in arrival order.

The model is the Nexmark generator that Flink, Feldera and RisingWave run
(``nexmark/nexmark``'s ``NexmarkGenerator``, defaults of its
``NexmarkConfiguration``):

* Event ``n`` (0, 1, 2, ...) is a person when ``n % 50 == 0``, an auction
  when ``n % 50`` is 1-3, a bid otherwise (1 : 3 : 46).  Its event time is
  ``2026-01-01 00:00:00 UTC + floor(n * 1e6 / rate)`` microseconds
  (``rate`` events per second of event time; unique while rate <= 1e6).
* Person ids and auction ids count up from 1000 in event order.  A new
  auction's seller is a hot seller with probability 3/4 (the first person
  of the last batch of 100), else one of the 1000 most recent persons or
  up to 10 not yet created.  A bid's auction is hot with probability 1/2
  (the first auction of the last batch of 100), else one of the last 100
  auctions or up to 10 ahead; its bidder is hot with probability 3/4 (the
  second person of the last batch of 100), else drawn like a seller.
  Categories 10-14; prices ``round(10 ** (6u) * 100)``; an auction's
  reserve is its initial bid plus a price, and it expires after a
  uniform time of mean the event time of 100 auctions.
* Names from Nexmark's 11 first and 9 last names; cities and states its
  ten and six; half of the bids on the four hot channels (Google,
  Facebook, Baidu, Apple), the others on ``channel-0`` ... ``channel-9999``
  whose urls carry ``&channel_id=`` in 9 of 10; ``extra`` padding each
  record to Nexmark's average sizes (200, 500, 100 bytes).

Differences, on purpose: random strings (item names, descriptions,
emails, credit cards, urls, ``extra``) are drawn from small seeded pools,
which keeps generation vectorized and ddflow's string interner small;
times are microseconds instead of milliseconds; the bidder id is
Nexmark's model's (Flink's copy adds the first person id twice, Feldera's
once, as here).

Randomness is a pure function of (seed, event number, field): a
splitmix64 hash, so any chunk of events is the same whether generated
alone or as part of a whole.  ``disorder_us`` delays each event's
arrival by a uniform 0..disorder_us microseconds; events arrive ordered
by that arrival time (ties by event number).  So an event arriving after
another is at most ``disorder_us`` earlier in event time than it, and a
frontier of (largest event time seen - disorder_us) is always safe.

>>> t = generate(100, seed=1)
>>> {k: v.num_rows for k, v in t.items()}
{'person': 2, 'auction': 6, 'bid': 92}
>>> t["person"].column("id").to_pylist(), str(t["bid"].schema.field("date_time").type)
([1000, 1001], 'timestamp[us]')
>>> sum(b["bid"].num_rows for b in batches(100, 30, seed=1, disorder_us=5_000))
92
"""
from __future__ import annotations

import datetime
import functools
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TABLES = ("person", "auction", "bid")

#: Column name -> SQL type, per table (ddflow's ``new_collection(schema=...)``).
SCHEMAS: dict[str, dict[str, str]] = {
    "person": {"id": "bigint", "name": "string", "email_address": "string", "credit_card": "string",
               "city": "string", "state": "string", "date_time": "timestamp", "extra": "string"},
    "auction": {"id": "bigint", "item_name": "string", "description": "string", "initial_bid": "bigint",
                "reserve": "bigint", "date_time": "timestamp", "expires": "timestamp", "seller": "bigint",
                "category": "bigint", "extra": "string"},
    "bid": {"auction": "bigint", "bidder": "bigint", "price": "bigint", "channel": "string", "url": "string",
            "date_time": "timestamp", "extra": "string"},
}
_ARROW = {"bigint": pa.int64(), "string": pa.string(), "timestamp": pa.timestamp("us")}
ARROW_SCHEMAS = {name: pa.schema([(c, _ARROW[t]) for c, t in cols.items()]) for name, cols in SCHEMAS.items()}

#: 2026-01-01 00:00:00 UTC in microseconds since the epoch: event 0's time.
BASE_TIME_US = int(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc).timestamp()) * 1_000_000

# NexmarkConfiguration's defaults and the generator's constants.
PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_PERSON_ID = FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID, NUM_CATEGORIES = 10, 5
PERSON_ID_LEAD = AUCTION_ID_LEAD = 10
NUM_ACTIVE_PEOPLE, NUM_IN_FLIGHT_AUCTIONS = 1000, 100
HOT_AUCTION_RATIO, HOT_SELLERS_RATIO, HOT_BIDDERS_RATIO = 2, 4, 4  # P(hot) = 1 - 1/ratio
HOT_BATCH = 100  # hot sellers, bidders, auctions: the first (bidders: second) of the last batch of 100
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
HOT_CHANNELS_RATIO = 2  # P(hot channel) = 1 - 1/2
CHANNELS_NUMBER = 10_000
AVG_PERSON_BYTES, AVG_AUCTION_BYTES, AVG_BID_BYTES = 200, 500, 100
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
             "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")

POOL = 1000  # random strings per pool (item names, descriptions, emails, credit cards)
EXTRA_VARIANTS = 16  # distinct ``extra`` strings per length

# Hash streams: one per random field.
(_DELAY, _SELLER_HOT, _SELLER, _CATEGORY, _INITIAL, _RESERVE, _EXPIRES, _ITEM, _DESC, _EXTRA_LEN, _EXTRA,
 _AUCTION_HOT, _AUCTION, _BIDDER_HOT, _BIDDER, _PRICE, _CHANNEL_HOT, _CHANNEL, _HOT_CHANNEL,
 _NAME, _EMAIL, _CARD, _CITY, _STATE) = range(24)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 (wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def uniform(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """A uniform double in [0, 1) per event number, a pure function of (seed, n, field).  O(len(n)).

    >>> a = uniform(0, np.arange(5), 3)
    >>> bool(((a >= 0) & (a < 1)).all()), bool((uniform(0, np.arange(5), 3) == a).all())
    (True, True)
    """
    with np.errstate(over="ignore"):
        offset = _mix(np.array([(seed * 1_000_003 + field) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
        x = _mix(n.astype(np.uint64) * _GOLDEN + offset)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _randint(seed: int, n: np.ndarray, field: int, m) -> np.ndarray:
    """Uniform ints in [0, m) (``m`` a positive int or an array of them)."""
    return np.floor(uniform(seed, n, field) * m).astype(np.int64)


def event_time(n: np.ndarray, rate: float = 10_000) -> np.ndarray:
    """Event ``n``'s time, microseconds since the epoch (before disorder).  O(len(n)).

    >>> (event_time(np.array([0, 1, 10_000])) - BASE_TIME_US).tolist()
    [0, 100, 1000000]
    """
    n = np.asarray(n, dtype=np.int64)
    if float(rate).is_integer():
        return BASE_TIME_US + (n * 1_000_000) // int(rate)
    return BASE_TIME_US + np.floor(n * (1e6 / rate)).astype(np.int64)


# -- ids: Nexmark's formulas, vectorized -------------------------------------------------------


def last_person(n: np.ndarray) -> np.ndarray:
    """The last person id (base 0) created by event ``n`` (its own if ``n`` is a person)."""
    return (n // TOTAL_PROPORTION) * PERSON_PROPORTION + np.minimum(n % TOTAL_PROPORTION, PERSON_PROPORTION - 1)


def last_auction(n: np.ndarray) -> np.ndarray:
    """The last auction id (base 0) created by event ``n`` (its own if ``n`` is an auction)."""
    epoch, off = n // TOTAL_PROPORTION, n % TOTAL_PROPORTION
    person = off < PERSON_PROPORTION
    bid = off >= PERSON_PROPORTION + AUCTION_PROPORTION
    epoch = np.where(person, epoch - 1, epoch)
    off = np.where(person | bid, AUCTION_PROPORTION - 1, off - PERSON_PROPORTION)
    return epoch * AUCTION_PROPORTION + off


def _some_person(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """One of the active persons or a few not yet created (base 0): Nexmark's ``nextBase0PersonId``."""
    people = last_person(n) + 1
    active = np.minimum(people, NUM_ACTIVE_PEOPLE)
    return people - active + _randint(seed, n, field, active + PERSON_ID_LEAD)


def _some_auction(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    """One of the auctions likely in flight or a few ahead (base 0): Nexmark's ``nextBase0AuctionId``."""
    last = last_auction(n)
    low = np.maximum(last - NUM_IN_FLIGHT_AUCTIONS, 0)
    return low + _randint(seed, n, field, last - low + 1 + AUCTION_ID_LEAD)


def _price(seed: int, n: np.ndarray, field: int) -> np.ndarray:
    return np.floor(10.0 ** (uniform(seed, n, field) * 6.0) * 100.0 + 0.5).astype(np.int64)


# -- string pools ------------------------------------------------------------------------------


def _strings(rng: np.random.Generator, count: int, max_len: int, special: str = " ") -> list[str]:
    """Nexmark's ``nextString``: 3 to max_len-1 letters, each a ``special`` with probability 1/13, trimmed."""
    lens = 3 + rng.integers(0, max_len - 3, count)
    letters = rng.integers(0, 26, (count, max_len)) + ord("a")
    letters = np.where(rng.integers(0, 13, (count, max_len)) == 0, ord(special), letters)
    rows = [bytes(letters[i, :lens[i]].astype(np.uint8)).decode() for i in range(count)]
    return [r.strip() for r in rows]


def _int_reverse(i: int) -> int:
    """Java's ``Math.abs(Integer.reverse(i))``."""
    r = int(f"{i & 0xFFFFFFFF:032b}"[::-1], 2)
    return abs(r - (1 << 32) if r >= 1 << 31 else r)


@functools.lru_cache(maxsize=4)
def pools(seed: int) -> dict[str, pa.Array]:
    """The seeded string pools: Arrow arrays the tables take from.  O(POOL + CHANNELS_NUMBER), cached per seed.

    ``channel`` and ``url`` are aligned: 0-3 the hot channels, 4 + i ``channel-i``.
    ``extra`` holds EXTRA_VARIANTS strings of each length 0 .. AVG_AUCTION_BYTES.

    >>> p = pools(0)
    >>> p["channel"][0].as_py(), p["channel"][4].as_py(), len(p["name"])
    ('Google', 'channel-0', 99)
    """
    rng = np.random.default_rng([seed, 23])

    def base_url() -> str:
        return "https://www.nexmark.com/" + "/".join(_strings(rng, 3, 5, "_")) + "/item.htm?query=1"

    hot_urls = [base_url() for _ in HOT_CHANNELS]
    cold_urls = []
    for i in range(CHANNELS_NUMBER):
        url = base_url()
        if rng.integers(0, 10) > 0:
            url += f"&channel_id={_int_reverse(i)}"
        cold_urls.append(url)
    text = bytes((rng.integers(0, 26, 1 << 16) + ord("a")).astype(np.uint8)).decode()
    extra = []
    for length in range(AVG_AUCTION_BYTES + 1):
        starts = rng.integers(0, len(text) - length, EXTRA_VARIANTS)
        extra += [text[s:s + length] for s in starts]
    cards = rng.integers(0, 10_000, (POOL, 4))
    return {
        "name": pa.array([f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES]),
        "email": pa.array([f"{a}@{b}.com" for a, b in zip(_strings(rng, POOL, 7), _strings(rng, POOL, 5))]),
        "card": pa.array([" ".join(f"{x:04d}" for x in row) for row in cards]),
        "city": pa.array(US_CITIES),
        "state": pa.array(US_STATES),
        "item": pa.array(_strings(rng, POOL, 20)),
        "desc": pa.array(_strings(rng, POOL, 100)),
        "channel": pa.array(list(HOT_CHANNELS) + [f"channel-{i}" for i in range(CHANNELS_NUMBER)]),
        "url": pa.array(hot_urls + cold_urls),
        "extra": pa.array(extra),
    }


def _lengths(arr: pa.Array) -> np.ndarray:
    return pc.utf8_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)


def _extra(seed: int, n: np.ndarray, current: np.ndarray | int, avg: int) -> pa.Array:
    """Nexmark's ``nextExtra``: padding to ``avg`` bytes on average (+-20%), empty past it."""
    desired = np.maximum(avg - np.asarray(current, dtype=np.int64), 0) * np.ones(len(n), dtype=np.int64)
    delta = np.floor(desired * 0.2 + 0.5).astype(np.int64)
    size = desired - delta + np.floor(uniform(seed, n, _EXTRA_LEN) * 2 * delta).astype(np.int64)
    size = np.minimum(size, AVG_AUCTION_BYTES)
    return pools(seed)["extra"].take(pa.array(size * EXTRA_VARIANTS + _randint(seed, n, _EXTRA, EXTRA_VARIANTS)))


def _take(seed: int, pool: str, idx: np.ndarray) -> pa.Array:
    return pools(seed)[pool].take(pa.array(idx))


def _ts(us: np.ndarray) -> pa.Array:
    return pa.array(us, type=pa.int64()).cast(pa.timestamp("us"))


# -- tables ------------------------------------------------------------------------------------


def persons(n: np.ndarray, seed: int = 0, rate: float = 10_000) -> pa.Table:
    """The person events ``n`` (event numbers of persons), in the given order.  O(len(n))."""
    p = pools(seed)
    name = _randint(seed, n, _NAME, len(p["name"]))
    email = _randint(seed, n, _EMAIL, POOL)
    card = _randint(seed, n, _CARD, POOL)
    city = _randint(seed, n, _CITY, len(US_CITIES))
    state = _randint(seed, n, _STATE, len(US_STATES))
    current = 8 + sum(_lengths(p[k])[i] for k, i in (("name", name), ("email", email), ("card", card),
                                                      ("city", city), ("state", state)))
    cols = [pa.array(last_person(n) + FIRST_PERSON_ID), _take(seed, "name", name), _take(seed, "email", email),
            _take(seed, "card", card), _take(seed, "city", city), _take(seed, "state", state),
            _ts(event_time(n, rate)), _extra(seed, n, current, AVG_PERSON_BYTES)]
    return pa.Table.from_arrays(cols, schema=ARROW_SCHEMAS["person"])


def auctions(n: np.ndarray, seed: int = 0, rate: float = 10_000) -> pa.Table:
    """The auction events ``n``, in the given order.  O(len(n))."""
    hot = _randint(seed, n, _SELLER_HOT, HOT_SELLERS_RATIO) > 0
    seller = np.where(hot, (last_person(n) // HOT_BATCH) * HOT_BATCH, _some_person(seed, n, _SELLER))
    initial = _price(seed, n, _INITIAL)
    ts = event_time(n, rate)
    # Mean length: the event time until NUM_IN_FLIGHT_AUCTIONS more auctions are created.
    ahead = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION
    horizon = event_time(n + ahead, rate) - ts
    expires = ts + 1 + _randint(seed, n, _EXPIRES, np.maximum(2 * horizon, 1))
    item = _randint(seed, n, _ITEM, POOL)
    desc = _randint(seed, n, _DESC, POOL)
    p = pools(seed)
    current = 8 + _lengths(p["item"])[item] + _lengths(p["desc"])[desc] + 40
    cols = [pa.array(last_auction(n) + FIRST_AUCTION_ID), _take(seed, "item", item), _take(seed, "desc", desc),
            pa.array(initial), pa.array(initial + _price(seed, n, _RESERVE)), _ts(ts), _ts(expires),
            pa.array(seller + FIRST_PERSON_ID), pa.array(FIRST_CATEGORY_ID + _randint(seed, n, _CATEGORY, NUM_CATEGORIES)),
            _extra(seed, n, current, AVG_AUCTION_BYTES)]
    return pa.Table.from_arrays(cols, schema=ARROW_SCHEMAS["auction"])


def bids(n: np.ndarray, seed: int = 0, rate: float = 10_000) -> pa.Table:
    """The bid events ``n``, in the given order.  O(len(n))."""
    hot_auction = _randint(seed, n, _AUCTION_HOT, HOT_AUCTION_RATIO) > 0
    auction = np.where(hot_auction, (last_auction(n) // HOT_BATCH) * HOT_BATCH, _some_auction(seed, n, _AUCTION))
    hot_bidder = _randint(seed, n, _BIDDER_HOT, HOT_BIDDERS_RATIO) > 0
    bidder = np.where(hot_bidder, (last_person(n) // HOT_BATCH) * HOT_BATCH + 1, _some_person(seed, n, _BIDDER))
    hot_channel = _randint(seed, n, _CHANNEL_HOT, HOT_CHANNELS_RATIO) > 0
    channel = np.where(hot_channel, _randint(seed, n, _HOT_CHANNEL, len(HOT_CHANNELS)),
                       len(HOT_CHANNELS) + _randint(seed, n, _CHANNEL, CHANNELS_NUMBER))
    cols = [pa.array(auction + FIRST_AUCTION_ID), pa.array(bidder + FIRST_PERSON_ID), pa.array(_price(seed, n, _PRICE)),
            _take(seed, "channel", channel), _take(seed, "url", channel), _ts(event_time(n, rate)),
            _extra(seed, n, 32, AVG_BID_BYTES)]
    return pa.Table.from_arrays(cols, schema=ARROW_SCHEMAS["bid"])


def tables(n: np.ndarray, seed: int = 0, rate: float = 10_000) -> dict[str, pa.Table]:
    """Events ``n`` (event numbers, in arrival order) split into the three tables, each in that order.  O(len(n)).

    >>> {k: v.num_rows for k, v in tables(np.arange(50)).items()}
    {'person': 1, 'auction': 3, 'bid': 46}
    """
    n = np.asarray(n, dtype=np.int64)
    rem = n % TOTAL_PROPORTION
    kind = (rem >= PERSON_PROPORTION).astype(np.int8) + (rem >= PERSON_PROPORTION + AUCTION_PROPORTION)
    return {"person": persons(n[kind == 0], seed, rate), "auction": auctions(n[kind == 1], seed, rate),
            "bid": bids(n[kind == 2], seed, rate)}


# -- arrival order -----------------------------------------------------------------------------


def arrival(n: np.ndarray, seed: int = 0, rate: float = 10_000, disorder_us: int = 0) -> np.ndarray:
    """Each event's arrival time: its event time plus a uniform delay of 0..disorder_us.  O(len(n))."""
    t = event_time(n, rate)
    return t + _randint(seed, n, _DELAY, disorder_us + 1) if disorder_us > 0 else t


def arrival_order(n_events: int, seed: int = 0, rate: float = 10_000, disorder_us: int = 0,
                  chunk: int = 1 << 16) -> Iterator[np.ndarray]:
    """Event numbers 0..n_events-1 in arrival order, in pieces; their concatenation does not depend on ``chunk``.

    Events are ordered by (arrival time, event number).  A piece holds the
    pending events that arrive before the next chunk's first event time,
    which no later event can arrive before.  O(n log chunk) time, memory
    O(chunk + events in flight).

    >>> np.concatenate(list(arrival_order(10, rate=1_000_000, disorder_us=3, chunk=4))).tolist()
    [0, 2, 3, 1, 5, 4, 6, 7, 9, 8]
    """
    pend_n = np.empty(0, dtype=np.int64)
    pend_t = np.empty(0, dtype=np.int64)
    for start in range(0, n_events, chunk):
        end = min(start + chunk, n_events)
        nums = np.arange(start, end, dtype=np.int64)
        pend_n = np.concatenate([pend_n, nums])
        pend_t = np.concatenate([pend_t, arrival(nums, seed, rate, disorder_us)])
        if end < n_events:
            out = pend_t < event_time(np.array([end]), rate)[0]
        else:
            out = np.ones(len(pend_n), dtype=bool)
        order = np.lexsort((pend_n[out], pend_t[out]))
        yield pend_n[out][order]
        pend_n, pend_t = pend_n[~out], pend_t[~out]


def generate(n_events: int, seed: int = 0, rate: float = 10_000, disorder_us: int = 0) -> dict[str, pa.Table]:
    """The first ``n_events`` events as three tables, each in arrival order.  O(n log n).

    The concatenation of :func:`batches` (in pieces of 2**20 events: faster
    than one piece).  About 0.9 s per million events here, 2 GB of tables
    for 10 million (most of it ``extra`` and ``url``).

    >>> t = generate(1000, seed=3, disorder_us=1_000)
    >>> t["bid"].num_rows, t["auction"].column("category").to_pylist()[:5]
    (920, [13, 10, 12, 10, 11])
    """
    parts = list(batches(n_events, 1 << 20, seed, rate, disorder_us)) or [tables(np.empty(0, np.int64), seed, rate)]
    return {name: pa.concat_tables([p[name] for p in parts]) for name in TABLES}


def batches(n_events: int, batch: int, seed: int = 0, rate: float = 10_000,
            disorder_us: int = 0) -> Iterator[dict[str, pa.Table]]:
    """The events of :func:`generate` in arrival order, ``batch`` events at a time (the last may be short).

    Each item maps every table to its rows among those ``batch`` events
    (possibly none).  Concatenated, the batches are ``generate``'s tables.
    Memory: O(batch + events in flight); O(n log n) time.

    >>> [sum(t.num_rows for t in b.values()) for b in batches(120, 50)]
    [50, 50, 20]
    """
    buf: list[np.ndarray] = []
    have = 0
    for piece in arrival_order(n_events, seed, rate, disorder_us, max(batch, 1 << 16)):
        buf.append(piece)
        have += len(piece)
        if have < batch:
            continue
        pending = np.concatenate(buf)
        cut = (len(pending) // batch) * batch
        for i in range(0, cut, batch):
            yield tables(pending[i:i + batch], seed, rate)
        buf, have = [pending[cut:]], len(pending) - cut
    if have:
        yield tables(np.concatenate(buf), seed, rate)
