"""TPC-H for ddflow: a vectorized data generator with the refresh functions, the 22 queries, and DuckDB as oracle.

``python -m bench.tpch`` measures the initial load and per-refresh times of
each query's view against DuckDB rerunning the query; ``tests/sql/test_tpch.py``
checks every query against DuckDB at every complete time of a refresh stream.
"""
