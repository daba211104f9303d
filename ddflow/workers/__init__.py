"""Several worker processes: key exchange, transport, collectives, the worker runtime and the driver's pool.

Imports graph and below; the dataflow reaches it only when ``workers > 1``.
"""
