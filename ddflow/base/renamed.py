"""Keyword arguments that changed their name: the old one keeps working for a release, with a DeprecationWarning.

The public API has one naming rule (``docs/concepts.md``, "Names"):
PySpark's camelCase in the PySpark-style builder
(:class:`ddflow.streaming.driver.StreamingDataflow`), snake_case
everywhere else.  A name that moved to follow it goes through here.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def renamed(**old_to_new: str) -> Callable[[F], F]:
    """A decorator: each keyword ``old`` is taken as ``new``, with a DeprecationWarning naming both.

    Both given at once is a TypeError.  Cost: one dict lookup per renamed
    keyword per call.

    >>> @renamed(snapshot_every="snapshotEvery")
    ... def state(path, snapshotEvery=50):
    ...     return path, snapshotEvery
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     state("/s", snapshot_every=3), str(w[0].message)
    (('/s', 3), 'state(snapshot_every=...) is now state(snapshotEvery=...); the old name goes in the next release')
    """
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got {old}= (its old name) and {new}= at once")
                    warnings.warn(f"{fn.__name__}({old}=...) is now {fn.__name__}({new}=...); the old name goes in "
                                  "the next release", DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
