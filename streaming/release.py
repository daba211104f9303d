"""What a stopped Spark streaming query leaves behind in the driver, released.

Measured with Spark 4.3.0 and py4j 0.10.9.9 (``tests/streaming/test_release.py``):
every query started and stopped in one process used to leave

* a py4j connection and the Python thread that serves it: PySpark's
  pinned-thread mode gives each JVM thread its own connection to the
  Python callback server, and the query's execution thread, which calls
  ``foreachBatch``, dies with the query while its connection and the
  Python thread blocked on it stay (one fd, one thread, per query);
* the Python data source's worker factory: Spark's streaming source runner
  makes a ``PythonWorkerFactory`` of its own per query, whose "Idle Worker
  Monitor" thread sleeps in a loop for the life of the JVM;
* a listening socket in the JVM: ``PythonWorkerFactory.createSimpleWorker``
  waits for the runner's Python process with a ``Selector`` it never
  closes, so the server socket it closes stays open (and listening)
  inside that selector.  Nothing outside Spark holds a reference to it:
  this one cannot be released from here (it is an fd, not a thread, and
  the test records it as Spark's).

:class:`QueryResources` takes care of the first two: the driver wraps its
``foreachBatch`` function with :meth:`QueryResources.batch_function`,
which notes the Python thread each call runs on, and
:meth:`QueryResources.release`, once the query's execution thread has
ended, closes those threads' connections (the threads end) and stops the
worker factories of the query's Python sources and their monitor threads.
The JVM's internals are reached by reflection; where a Spark version lays
them out otherwise, that part is skipped with a warning (it only costs
the leak).
"""
from __future__ import annotations

import logging
import socket
import threading
from typing import Any, Callable

_log = logging.getLogger(__name__)

__all__ = ["QueryResources"]


class QueryResources:
    """The threads, connections and runners one streaming query holds in the driver (see the module docstring).

    >>> r = QueryResources()
    >>> f = r.batch_function(lambda df, batch_id: batch_id * 2)
    >>> f(None, 21), threading.current_thread() in r.threads
    (42, True)
    >>> r.release()  # no query: nothing to wait for or stop
    """

    def __init__(self) -> None:
        self.query: Any = None  # the StreamingQuery, once started
        self.threads: set[threading.Thread] = set()  # the Python threads foreachBatch ran on

    def batch_function(self, fn: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        """``fn`` for ``foreachBatch``, noting the Python thread each call runs on.  Cost: a set insert a batch."""
        threads = self.threads

        def batch(df: Any, batch_id: int) -> None:
            threads.add(threading.current_thread())
            return fn(df, batch_id)

        return batch

    def release(self, timeout: float = 60.0) -> None:
        """Stop the query if it still runs, wait for its execution thread, and release what it left.

        Cost: one reflective walk over the query's sources and the JVM's threads.
        """
        q, self.query = self.query, None
        if q is not None:
            if q.isActive:
                q.stop()
            if not _join_execution_thread(q, timeout):
                _log.warning("ddflow: the streaming query's execution thread did not end within %.0f s; its "
                             "callback connection is left open", timeout)
                return
            _stop_source_runners(q)
        threads, self.threads = self.threads, set()
        for t in threads:
            if t is not threading.current_thread():
                _close_callback_connection(t, timeout)


def _join_execution_thread(query: Any, timeout: float) -> bool:
    """Wait for the JVM thread that ran the query's batches; whether it has ended."""
    try:
        thread = query._jsq.streamingQuery().queryExecutionThread()
        thread.join(int(timeout * 1000))
        return not thread.isAlive()
    except Exception as e:  # noqa: BLE001 - another Spark's layout: assume nothing about its threads
        _log.warning("ddflow: cannot find the streaming query's execution thread (%s)", e)
        return False


def _close_callback_connection(thread: threading.Thread, timeout: float) -> None:
    """Shut the socket of the py4j connection a (now idle) callback thread serves; the thread then ends."""
    conn = getattr(getattr(thread, "_target", None), "__self__", None)
    sock = getattr(conn, "socket", None)
    if sock is None or not hasattr(conn, "wait_for_commands"):
        return  # not a py4j callback connection's thread (e.g. a test calling the function directly)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed already
    thread.join(timeout)


def _stop_source_runners(query: Any) -> None:
    """Stop the worker factory of each Python streaming source of the query, and its monitor thread."""
    from pyspark import SparkContext

    try:
        sources = query._jsq.streamingQuery().sources()
        factories = []
        for i in range(sources.size()):
            runner = _field(sources.apply(i), "runner")
            if runner is None:
                continue
            factory = _field(runner, "pythonWorkerFactory")
            if factory is not None and factory.isDefined():
                factories.append(factory.get())
        if not factories:
            return
        for f in factories:
            f.stop()
        for t in SparkContext._jvm.java.lang.Thread.getAllStackTraces().keySet():
            if not t.getClass().getName().endswith("PythonWorkerFactory$MonitorThread"):
                continue
            outer = _field(t, "$outer")
            if outer is not None and any(outer.equals(f) for f in factories):
                _end_thread(t)
    except Exception as e:  # noqa: BLE001 - another Spark's layout: only the leak remains
        _log.warning("ddflow: cannot stop the streaming source runner's worker factory (%s); it keeps a JVM "
                     "thread", e)


def _field(obj: Any, name: str) -> Any:
    """A declared field of a JVM object or its superclasses, read by reflection (None if there is none)."""
    cls = obj.getClass()
    while cls is not None:
        for f in cls.getDeclaredFields():
            if f.getName() == name:
                f.setAccessible(True)
                return f.get(obj)
        cls = cls.getSuperclass()
    return None


def _end_thread(t: Any) -> None:
    """End a sleeping JVM thread: ``Thread.stop`` (its ThreadDeath is silent), or, where the JVM no longer
    supports that (JDK 20+), an interrupt (the thread ends with a stack trace in the JVM's log)."""
    try:
        t.stop()
    except Exception:  # noqa: BLE001 - UnsupportedOperationException on newer JDKs
        t.interrupt()
