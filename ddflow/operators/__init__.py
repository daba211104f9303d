"""Operators: stateless transforms, loop plumbing, arrangements, join, reduce and outputs (imports graph, traces, base)."""
