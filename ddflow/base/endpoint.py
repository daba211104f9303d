"""A Prometheus endpoint: the families a callable returns, served over HTTP by the ``prometheus-client`` package.

Opt-in, and bound to loopback unless told otherwise: metrics name the
operators, inputs and outputs of a query, which is not for every network.
The families are computed on each scrape (the engine keeps only counters),
so a scrape costs what :meth:`ddflow.Dataflow.metrics` costs, on the
server's thread: the callable must be safe to call from another thread
(the dataflow's takes its lock).
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ddflow.base.metrics import Family, Histogram
from ddflow.errors import UsageError


class MetricsServer:
    """Serves ``source()``'s families at ``http://host:port/metrics`` until :meth:`close` (or leaving ``with``).

    ``port=0`` takes a free port; :attr:`url` says which.  Cost: a thread
    and a socket; each scrape calls ``source`` once.

    >>> from ddflow.base.metrics import Family
    >>> with MetricsServer(lambda: [Family("ddflow_up", "gauge", "Up.", [({}, 1)])]) as server:
    ...     import urllib.request
    ...     body = urllib.request.urlopen(server.url, timeout=10).read().decode()
    >>> [line for line in body.splitlines() if line.startswith("ddflow_up")]
    ['ddflow_up 1.0']
    """

    def __init__(self, source: Callable[[], list[Family]], port: int = 0, host: str = "127.0.0.1"):
        try:
            from prometheus_client import start_http_server
            from prometheus_client.registry import CollectorRegistry
        except ImportError as e:
            raise UsageError("a metrics endpoint needs the prometheus-client package: "
                             "pip install 'ddflow[metrics]'") from e
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(source))
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as e:
            raise UsageError(f"the metrics endpoint cannot listen on {host}:{port}: {e}") from e
        self.host = host
        self.port = self._server.server_port
        self.closed = False

    @property
    def url(self) -> str:
        """Where a scraper (or ``python -m ddflow.top``) reads the metrics."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and release the socket and the thread.  Idempotent."""
        if self.closed:
            return
        self.closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> "MetricsServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MetricsServer {self.url}{' closed' if self.closed else ''}>"


class _Collector:
    """prometheus-client's view of our families (its metric family objects, made per scrape)."""

    def __init__(self, source: Callable[[], list[Family]]):
        self.source = source

    def collect(self):
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        for f in self.source():
            names = sorted({k for labels, _ in f.samples for k in labels})
            if f.kind == "histogram":
                m = HistogramMetricFamily(f.name, f.help, labels=names)
                for labels, h in f.samples:
                    assert isinstance(h, Histogram)
                    buckets = [("+Inf" if math.isinf(b) else repr(float(b)), n) for b, n in h.cumulative()]
                    m.add_metric([labels.get(k, "") for k in names], buckets, h.sum)
            else:
                cls = CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily
                m = cls(f.name, f.help, labels=names)
                for labels, v in f.samples:
                    m.add_metric([labels.get(k, "") for k in names], float(v))
            yield m
