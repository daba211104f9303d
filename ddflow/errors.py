"""Errors raised by the dataflow, each naming what and where."""


class DataflowError(RuntimeError):
    """The dataflow cannot proceed; the message names the operator or collection."""


class NonConvergence(DataflowError):
    """A loop still changed after its ``max_iterations`` rounds."""


class FrontierError(ValueError):
    """An update or frontier at a time the dataflow has already passed."""
