"""Nexmark for ddflow: the person/auction/bid generator, the queries in Spark SQL, and DuckDB as oracle.

``python -m bench.nexmark`` streams generated events into event-time
tables in arrival order, maintains each query as a view, advances the
frontier by the lateness bound, and checks the views against DuckDB at
checkpoints; ``tests/test_nexmark_generator.py`` checks the generator and
the oracle's window translation against plain Python.
"""
