"""ddflow's workers as the tasks of one Spark barrier stage: ``Dataflow(workers=W, spark=spark)``.

Spark places the tasks, starts them, ships them the dataflow's code
(cloudpickle, the way it ships any Python function, so lambdas and
closures keep working) and kills them when asked.  The tasks learn each
other's addresses through ``BarrierTaskContext.allGather``; from then on
ddflow's own protocol runs between them over TCP
(:mod:`ddflow.workers.remote`).  The stage is one job, submitted from a
thread of the driver when the dataflow first runs and kept alive while
the dataflow lives: the tasks hold their slots all that time, so a
streaming query keeps ``reserve`` slots free for its own micro-batches.

>>> from ddflow.streaming.cluster import SparkLauncher   # doctest: +SKIP
>>> flow = ddflow.Dataflow(workers=4, spark=spark)       # doctest: +SKIP
"""
from __future__ import annotations

import gc
import itertools
import json
import os
import re
import socket
import threading
import time
import weakref
from typing import Any

from ddflow import errors
from ddflow.workers.remote import register_launcher


#: Seconds a start waits for a new cluster's executors to register before it counts too few slots.
EXECUTOR_WAIT_S = 60.0

#: Numbers this process's barrier jobs' groups (``ddflow-workers-<pid>-<n>``): unique, and no secret in them.
_GROUPS = itertools.count(1)

#: Launchers of this process whose barrier job is running: they hold task slots (``SparkLauncher.tasks``).
_RUNNING: "weakref.WeakSet[SparkLauncher]" = weakref.WeakSet()


def _task(payload: bytes, workers: int, tasks: int, address: tuple[str, int], credentials: Any):
    """The function each barrier task runs (on an executor): serve its share of the workers.

    ``credentials`` (the dataflow's secret among them) reach the tasks
    inside this function, which Spark ships to them as it ships any task's
    code: never in the job's name or description, which Spark's UI, REST
    API and event log show.
    """

    def run(_rows):
        from pyspark import BarrierTaskContext

        from ddflow.workers.remote import serve_task

        ctx = BarrierTaskContext.get()
        ended = serve_task(payload, ctx.partitionId(), tasks, workers, address, credentials, ctx.allGather)
        yield json.dumps({"task": ctx.partitionId(), "ended": ended})

    return run


def _cause(e: BaseException) -> str:
    """The line of a failed Spark job's error that says why: the Python error in a task, or Spark's reason."""
    text = str(e)
    python = [m for m in re.findall(r"^\s*((?:\w+\.)*\w+(?:Error|Exception|Exit): .+)$", text, re.M)
              if not m.startswith(("py4j", "org.", "java.", "scala."))]
    if python:
        return python[-1][:500]
    spark = re.search(r"(Job aborted due to stage failure: .+|Job \d+ cancelled.*)$", text, re.M)
    if spark:
        return spark.group(1)[:500]
    lines = [x for x in text.splitlines() if x.strip()]
    return lines[0][:500] if lines else type(e).__name__


#: What an executor lacks when its task fails with one of these: ddflow, or a native extension built for it.
_INSTALL = ("each executor needs ddflow installed for its own Python and platform: its wheel in the executors' "
            "environment, or a packed venv shipped with spark.archives; see docs/workers.md, 'On a Spark cluster'")


def explained(cause: str) -> str:
    """A failed task's cause, with what the executors need when it says they cannot import ddflow or load its
    native extension.  O(len(cause)).

    >>> explained("ModuleNotFoundError: No module named 'ddflow'").endswith("Spark cluster section)")
    True
    >>> explained("ValueError: bad")
    'ValueError: bad'
    """
    if "NativeError" in cause or re.search(r"No module named '?ddflow\b", cause):
        return f"{cause} ({_INSTALL})"
    return cause


class SparkLauncher:
    """Runs the workers as one barrier stage of T tasks on ``spark``'s executors.

    ``tasks``: how many tasks (default: as many as the workers, at most
    the task slots the cluster has, less ``reserve``); task t hosts
    workers w with ``w % T == t``, forked from the task's Python worker.
    ``reserve``: slots left free for other jobs (a streaming query's
    micro-batches need at least one).  The slots other ddflow dataflows
    of this process hold are not free: a start that finds too few says
    which dataflows hold them.
    """

    def __init__(self, spark: Any, tasks: int | None = None, reserve: int = 0):
        self.sc = spark.sparkContext
        conf = self.sc.getConf()
        self.host = conf.get("spark.driver.host", None) or socket.gethostbyname(socket.gethostname())
        self.want = tasks
        self.reserve = reserve
        #: What the job's description calls the dataflow (``Dataflow`` sets it from its name and creation site).
        self.label = "ddflow dataflow"
        self.n_tasks = 0
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.cancelled = False  #: cancel() was asked: the job is ending
        self.group = None
        self.description = None

    def dumps(self, obj: Any) -> bytes:
        from pyspark import cloudpickle

        return cloudpickle.dumps(obj)

    def slots(self) -> int:
        """Tasks the cluster can run at once now (Spark's own count, as its barrier check uses)."""
        jsc = self.sc._jsc.sc()
        try:
            return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))
        except Exception:  # noqa: BLE001 - an internal API: fall back to the default parallelism
            return int(self.sc.defaultParallelism)

    def _holders(self) -> list["SparkLauncher"]:
        """The other ddflow dataflows of this process whose barrier jobs hold slots of this cluster now."""
        return [h for h in list(_RUNNING) if h is not self and h.sc is self.sc and not h.join(0)]

    def tasks(self, workers: int) -> int:
        """How many tasks: the free slots (less ``reserve`` and what other ddflow dataflows hold), at most ``workers``.

        Too few: first the jobs being cancelled get time to end, and
        dataflows dropped in reference cycles are collected (their
        finalizers release their slots); then the refusal names the
        dataflows that still hold slots.
        """
        need = self.want or 1
        total = self.slots()
        deadline = time.monotonic() + EXECUTOR_WAIT_S
        while total < need and time.monotonic() < deadline:  # a new cluster's executors are still registering
            time.sleep(0.5)
            total = self.slots()
        held = self._holders()
        if total - self.reserve - sum(h.n_tasks for h in held) < need:
            for h in held:
                if h.cancelled:
                    h.join(30.0)
            gc.collect()
            held = self._holders()
        free = total - self.reserve - sum(h.n_tasks for h in held)
        if free < need:
            who = "; ".join(f"{h.label} holds {h.n_tasks} (Spark job group {h.group})" for h in held)
            because = f": {who}; close() it (or leave its with block) first" if held else ""
            raise errors.UsageError(f"ddflow's workers need {need} free task slot{'s' if need > 1 else ''}; the "
                                    f"cluster has {total}, {self.reserve} kept for other jobs{because}")
        return min(self.want, workers) if self.want is not None else min(workers, free)

    def busy(self) -> str:
        """What else holds the cluster's slots now: other ddflow dataflows and other running Spark jobs ("" if none)."""
        parts = [f"{h.label} holds {h.n_tasks} (Spark job group {h.group})" for h in self._holders()]
        try:
            tracker = self.sc.statusTracker()
            mine = set(tracker.getJobIdsForGroup(self.group)) if self.group else set()
            ours = {j for h in self._holders() for j in tracker.getJobIdsForGroup(h.group)}
            for job in tracker.getActiveJobsIds():
                info = tracker.getJobInfo(job)
                if job in mine or job in ours or info is None:
                    continue
                stages = [tracker.getStageInfo(s) for s in info.stageIds]
                running = sum(st.numActiveTasks for st in stages if st is not None)
                names = ", ".join(sorted({st.name for st in stages if st is not None}))
                parts.append(f"Spark job {job} ({names}) runs {running} task{'s' if running != 1 else ''}")
        except Exception:  # noqa: BLE001 - the status tracker is a best effort for an error message
            pass
        return "; ".join(parts)

    def launch(self, payload: bytes, workers: int, tasks: int, address: tuple[str, int], credentials: Any) -> None:
        # The group only has to be unique in this SparkContext; it names the dataflow's process, not its secret.
        self.group = f"ddflow-workers-{os.getpid()}-{next(_GROUPS)}"
        self.n_tasks = tasks
        fn = _task(payload, workers, tasks, address, credentials)
        #: What Spark's UI, REST API and event log show of the job (with the group): the dataflow, no secret.
        self.description = f"{self.label}: {workers} workers in {tasks} barrier tasks"

        def body() -> None:
            self.sc.setJobGroup(self.group, self.description, interruptOnCancel=True)
            try:
                self.sc.parallelize(range(tasks), tasks).barrier().mapPartitions(fn).collect()
            except BaseException as e:  # noqa: BLE001 - reported through error()
                self._error = e

        self._thread = threading.Thread(target=body, name="ddflow-barrier-stage", daemon=True)
        _RUNNING.add(self)
        self._thread.start()

    def error(self) -> str | None:
        if self._error is None:
            return None
        return f"the Spark job running the workers failed: {explained(_cause(self._error))}"

    def cancel(self) -> None:
        if self.group is not None and self._thread is not None and self._thread.is_alive():
            self.cancelled = True
            try:
                self.sc.cancelJobGroup(self.group)
            except Exception:  # noqa: BLE001 - the session may be stopping
                pass

    def join(self, seconds: float) -> bool:
        if self._thread is None:
            return True
        self._thread.join(seconds)
        return not self._thread.is_alive()


register_launcher("spark", SparkLauncher)  # Dataflow(spark=...): the engine finds it here, never importing this layer
