"""TPC-DS for ddflow: dsdgen's data and the 99 queries (DuckDB's TPC-DS extension), random refreshes, DuckDB as oracle.

``python -m bench.tpcds.check`` classifies every query (equal to DuckDB at
every complete time, refused, error at run, wrong, timeout) and writes
``bench/results/tpcds_status.json``; ``python -m bench.tpcds`` measures the
per-refresh time of the queries that pass against DuckDB recomputing
them; ``tests/sql/test_tpcds.py`` keeps the status from regressing.
"""
