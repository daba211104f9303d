"""Every error ddflow raises derives from :class:`DdflowError`; each message names what and where.

Catch ``DdflowError`` for all of them.  Errors that are also a
``ValueError``/``TypeError``/``RuntimeError`` in spirit derive from that
builtin too, so code that catches the builtin keeps working.

This module imports nothing, so every layer (streaming's broker and
Kafka source included) can derive from it.
"""


class DdflowError(Exception):
    """The root of every error ddflow raises."""


class DataflowError(DdflowError, RuntimeError):
    """The dataflow cannot proceed; the message names the operator or collection."""


class WorkerLost(DataflowError):
    """A worker process died, hung, or its placement (a Spark job) ended: the work is intact, the workers are not.

    Unlike an error raised by an operator, running the same input again
    on new workers can succeed: the streaming driver does so, restoring
    from its input log.
    """


class NonConvergence(DataflowError):
    """A loop still changed after its ``max_iterations`` rounds."""


class FrontierError(DdflowError, ValueError):
    """An update or frontier at a time the dataflow has already passed."""


class SchemaError(DdflowError, TypeError, ValueError):
    """Records whose fields do not fit the number or kinds a collection or operator already has.

    A TypeError (a field changed kind) and a ValueError (a record changed
    arity), as the engine raised before this class existed.
    """


class UsageError(DdflowError, TypeError, ValueError):
    """An API called with arguments it cannot take, or out of order (a dropped reader, a frontier going back)."""
