"""The Nexmark queries in Spark SQL, adapted from the Flink, Feldera and RisingWave suites, with what was changed.

Tables and columns are RisingWave's (``person``, ``auction``, ``bid``;
``date_time``, ``item_name``, ``initial_bid`` ...), types Spark's (see
:data:`bench.nexmark.generator.SCHEMAS`).  Windows are Spark's:
``GROUP BY ..., window(date_time, '10 seconds'[, '2 seconds'])`` selecting
``window.start`` / ``window.end`` where Flink writes ``TUMBLE``/``HOP``
table functions, ``session_window(date_time, '10 seconds')`` where it
writes ``SESSION``.  Window sizes are the suites' (10 s tumbling; 10 s
hopping every 2 s; 10 s session gap).

Functions are Spark's: ``mod``, ``hour``, ``date_format`` (Java
patterns), ``regexp_extract`` (the empty string when nothing matches,
where Flink's gives NULL), ``split_part`` (1-based, where Flink's
``SPLIT_INDEX`` is 0-based), ``count(...) FILTER (WHERE ...)``.
Flink's user functions are written out (``count_char``).

:data:`NOTES` says for each query what it shows and what differs from
Flink's text; :data:`LEFT_OUT` lists the suite's other queries and why
they are not here.

>>> sorted(QUERIES, key=lambda q: int(q[1:]))[:4], len(QUERIES)
(['q0', 'q1', 'q2', 'q3'], 20)
>>> set(QUERIES) == set(NOTES) and not set(QUERIES) & set(LEFT_OUT)
True
"""
from __future__ import annotations

_RANKS = """
     count(*) AS total_{x},
     count(*) FILTER (WHERE price < 10000) AS rank1_{x},
     count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_{x},
     count(*) FILTER (WHERE price >= 1000000) AS rank3_{x}"""
_DISTINCT = """
     count(DISTINCT {c}) AS total_{x},
     count(DISTINCT {c}) FILTER (WHERE price < 10000) AS rank1_{x},
     count(DISTINCT {c}) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_{x},
     count(DISTINCT {c}) FILTER (WHERE price >= 1000000) AS rank3_{x}"""
_Q15_COUNTS = ",".join([_RANKS.format(x="bids"), _DISTINCT.format(c="bidder", x="bidders"),
                        _DISTINCT.format(c="auction", x="auctions")])

QUERIES: dict[str, str] = {
    "q0": """
SELECT auction, bidder, price, date_time, extra FROM bid""",
    "q1": """
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid""",
    "q2": """
SELECT auction, price FROM bid WHERE mod(auction, 123) = 0""",
    "q3": """
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')""",
    "q4": """
SELECT Q.category, avg(Q.final) AS avg_final
FROM (
    SELECT max(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category""",
    "q5": """
SELECT AuctionBids.auction, AuctionBids.num
FROM (
    SELECT auction, count(*) AS num, window.start AS starttime, window.end AS endtime
    FROM bid
    GROUP BY auction, window(date_time, '10 seconds', '2 seconds')
) AS AuctionBids
JOIN (
    SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
    FROM (
        SELECT count(*) AS num, window.start AS starttime, window.end AS endtime
        FROM bid
        GROUP BY auction, window(date_time, '10 seconds', '2 seconds')
    ) AS CountBids
    GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn""",
    "q7": """
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
    SELECT max(price) AS maxprice, window.end AS date_time
    FROM bid
    GROUP BY window(date_time, '10 seconds')
) B1 ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL 10 SECONDS AND B1.date_time""",
    "q8": """
SELECT P.id, P.name, P.starttime
FROM (
    SELECT id, name, window.start AS starttime, window.end AS endtime
    FROM person
    GROUP BY id, name, window(date_time, '10 seconds')
) P
JOIN (
    SELECT seller, window.start AS starttime, window.end AS endtime
    FROM auction
    GROUP BY seller, window(date_time, '10 seconds')
) A ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime""",
    "q9": """
SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra,
       auction, bidder, price, bid_date_time, bid_extra
FROM (
    SELECT A.*, B.auction, B.bidder, B.price, B.date_time AS bid_date_time, B.extra AS bid_extra,
           ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC) AS rownum
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
) Q
WHERE rownum <= 1""",
    "q11": """
SELECT bidder, count(*) AS bid_count, session_window.start AS starttime, session_window.end AS endtime
FROM bid
GROUP BY bidder, session_window(date_time, '10 seconds')""",
    "q12": """
SELECT bidder, count(*) AS bid_count, window.start AS starttime, window.end AS endtime
FROM bid
GROUP BY bidder, window(date_time, '10 seconds')""",
    "q14": """
SELECT auction, bidder, 0.908 * price AS price,
       CASE
           WHEN hour(date_time) >= 8 AND hour(date_time) <= 18 THEN 'dayTime'
           WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime'
           ELSE 'otherTime'
       END AS bid_time_type,
       date_time, extra,
       length(extra) - length(replace(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    "q15": f"""
SELECT CAST(date_time AS DATE) AS `day`,{_Q15_COUNTS}
FROM bid
GROUP BY CAST(date_time AS DATE)""",
    "q16": f"""
SELECT channel, CAST(date_time AS DATE) AS `day`, date_format(max(date_time), 'HH:mm') AS `minute`,{_Q15_COUNTS}
FROM bid
GROUP BY channel, CAST(date_time AS DATE)""",
    "q17": f"""
SELECT auction, CAST(date_time AS DATE) AS `day`,{_RANKS.format(x="bids")},
     min(price) AS min_price,
     max(price) AS max_price,
     avg(price) AS avg_price,
     sum(price) AS sum_price
FROM bid
GROUP BY auction, CAST(date_time AS DATE)""",
    "q18": """
SELECT auction, bidder, price, channel, url, date_time, extra
FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rank_number
      FROM bid) B
WHERE rank_number <= 1""",
    "q19": """
SELECT * FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, date_time ASC) AS rank_number
    FROM bid) B
WHERE rank_number <= 10""",
    "q20": """
SELECT auction, bidder, price, channel, url, B.date_time AS bid_date_time, B.extra AS bid_extra,
       item_name, description, initial_bid, reserve, A.date_time AS auction_date_time, expires, seller, category,
       A.extra AS auction_extra
FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10""",
    "q21": """
SELECT auction, bidder, price, channel,
       CASE
           WHEN lower(channel) = 'apple' THEN '0'
           WHEN lower(channel) = 'google' THEN '1'
           WHEN lower(channel) = 'facebook' THEN '2'
           WHEN lower(channel) = 'baidu' THEN '3'
           ELSE regexp_extract(url, '(&|^)channel_id=([^&]*)', 2)
       END AS channel_id
FROM bid
WHERE regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) <> ''
   OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    "q22": """
SELECT auction, bidder, price, channel,
       split_part(url, '/', 4) AS dir1,
       split_part(url, '/', 5) AS dir2,
       split_part(url, '/', 6) AS dir3
FROM bid""",
}

NOTES: dict[str, str] = {
    "q0": "Pass-through: the cost of ingesting bids.",
    "q1": "Currency conversion: a projection with a decimal product (Spark types 0.908 * bigint as decimal(23,3)).",
    "q2": "Selection: bids on every 123rd auction (Flink's MOD).",
    "q3": "Local item suggestion: an incremental join of auctions and persons with filters on both.",
    "q4": "Average winning price per category: an interval join (bid time between auction start and expiry), "
          "max per auction, then avg per category; no windows, state grows.",
    "q5": "Hot items: per 10 s window sliding every 2 s, the auctions with the most bids (window counts joined "
          "with their per-window max); Flink's HOP(2 s, 10 s) as Spark's window(ts, '10 seconds', '2 seconds').",
    "q7": "Highest bid: bids whose price is the max of a 10 s tumbling window, the bid's time within the 10 s "
          "before the window's end (BETWEEN: both ends inclusive, as in Flink).",
    "q8": "New users: persons who opened an auction in the 10 s tumbling window in which they registered "
          "(a join on both windows' bounds).",
    "q9": "Winning bids: per auction, its highest bid within its lifetime (ROW_NUMBER top 1; ties broken by the "
          "earlier bid, as in Flink's text).",
    "q11": "User sessions: bids per bidder per session of activity with a 10 s gap (Flink's SESSION window; "
           "Feldera and RisingWave leave it out).",
    "q12": "Bids per bidder per 10 s window.  Flink's text windows on processing time (PROCTIME()); as in "
           "Feldera's suite, the window is on event time here.",
    "q14": "Calculation: a filter on a decimal product, a CASE on hour(date_time) (UTC) and Flink's count_char "
           "user function written as length(extra) - length(replace(extra, 'c', '')).",
    "q15": "Bidding statistics per day: counts and distinct counts with FILTER by price rank.  Flink groups by "
           "DATE_FORMAT(date_time, 'yyyy-MM-dd'); here by CAST(date_time AS DATE), as Feldera does.",
    "q16": "Channel statistics per day: q15 per channel, with the day's latest minute as "
           "date_format(max(date_time), 'HH:mm') (Flink: max of the formatted minutes; the same value).",
    "q17": "Auction statistics per day: counts by price rank, min, max, avg, sum per auction and day "
           "(day as in q15; avg is a double, where Flink's sink casts it to bigint).",
    "q18": "Last bid per bidder and auction: ROW_NUMBER top 1 by date_time descending (deduplication).",
    "q19": "Auction top 10 by price: ROW_NUMBER with the rank as a column.  Ties on price are broken by the "
           "earlier bid (Flink's text leaves them to chance, which no oracle can check).",
    "q20": "Expanded bids: bids joined with their auction, category 10.",
    "q21": "Channel ids: a CASE on the channel, else the url's channel_id.  Spark's regexp_extract gives '' "
           "when nothing matches (Flink's gives NULL), so the filter says <> '' where Flink's says IS NOT NULL.",
    "q22": "Url directories: Flink's 0-based SPLIT_INDEX(url, '/', 3..5) as Spark's 1-based "
           "split_part(url, '/', 4..6).",
}

LEFT_OUT: dict[str, str] = {
    "q6": "Average selling price by seller: an OVER window of the last 10 rows (ROWS BETWEEN 10 PRECEDING) "
          "per seller, over a top 1; Flink cannot run it either (its suite marks it unsupported).",
    "q10": "Log to file system: a partitioned filesystem sink with partition commits (a connector, not a query).",
    "q13": "Bounded side input join: a lookup join FOR SYSTEM_TIME AS OF the processing time against a side "
           "input file (Feldera rewrites it as an ASOF join); it needs processing time and a side table.",
}
