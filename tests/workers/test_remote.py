"""Workers on several hosts (ddflow/workers/remote.py), the hosts being network namespaces this test makes.

Two namespaces, each with its own address on a bridge the test creates
(``ip netns``, veth); the driver listens on the bridge's address.  A
launcher of the test's own starts one task per namespace
(``ip netns exec``) and serves their all-gather, as Spark's barrier
stage would: so the protocol is shown to run between distinct addresses,
and errors to name the right host.  Needs root (CAP_NET_ADMIN); skipped
where namespaces cannot be made.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess

import numpy as np
import pytest

import ddflow
from ddflow.workers.remote import RemotePlacement
from launchers import TaskLauncher


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def hosts():
    """Two namespaces on a bridge: (driver address, [namespace, ...], [their addresses])."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    tag = f"dd{os.getpid() % 100000}"
    net = f"10.{random.randrange(100, 250)}.{random.randrange(0, 250)}"
    spaces = [f"{tag}a", f"{tag}b"]
    made = []
    try:
        _ip("link", "add", f"{tag}br", "type", "bridge")
        made.append(("link", f"{tag}br"))
        _ip("addr", "add", f"{net}.1/24", "dev", f"{tag}br")
        _ip("link", "set", f"{tag}br", "up")
        for i, ns in enumerate(spaces):
            _ip("netns", "add", ns)
            made.append(("netns", ns))
            _ip("link", "add", f"{ns}v", "type", "veth", "peer", "name", "eth0", "netns", ns)
            made.append(("link", f"{ns}v"))
            _ip("link", "set", f"{ns}v", "master", f"{tag}br", "up")
            _ip("-n", ns, "addr", "add", f"{net}.{i + 2}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        for kind, name in reversed(made):
            subprocess.run(["ip", kind, "del", name], capture_output=True)
        pytest.skip(f"cannot make network namespaces here: {e}")
    yield f"{net}.1", spaces, [f"{net}.{i + 2}" for i in range(len(spaces))]
    for kind, name in reversed(made):
        subprocess.run(["ip", kind, "del", name], capture_output=True)


def NetnsLauncher(host: str, spaces: list[str]) -> TaskLauncher:
    """Task t in namespace t, each its own host: what Spark's barrier stage does across machines."""
    return TaskLauncher(host, spaces)


def _reach(flow):
    hr, roots = flow.new_collection("roots")
    he, edges = flow.new_collection("edges")
    reach = roots.iterate(lambda r: r.join(edges).project(1).concat(roots).distinct()).capture()
    labels = edges.map(lambda e: (f"n{e[0]}", e[1])).project(0).count().capture()
    return hr, he, [reach, labels]


def test_workers_on_two_hosts_deliver_what_one_worker_does(hosts):
    """W = 3 on two hosts (each its own address): every run's changes equal W = 1's; the hosts are the namespaces'."""
    driver, spaces, addrs = hosts
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 25, 150).tolist(), rng.integers(0, 25, 150).tolist()
    outs = {}
    for w in (1, 3):
        placement = RemotePlacement(NetnsLauncher(driver, spaces), start_timeout=60) if w > 1 else None
        with ddflow.Dataflow(workers=w, placement=placement) as flow:
            hr, he, caps = _reach(flow)
            hr.update([(0,), (1,)], times=0)
            for run in range(3):
                he.update(list(zip(src[50 * run:50 * run + 50], dst[50 * run:50 * run + 50])), times=run)
                if run:
                    he.update(list(zip(src[50 * run - 50:50 * run - 25], dst[50 * run - 50:50 * run - 25])),
                              times=run, diffs=-1)
                flow.advance_to(run + 1)
                flow.run()
                outs.setdefault(w, []).append([sorted(c.drain()) for c in caps])
            if w > 1:
                assert flow._pool.placement.hosts == [addrs[0], addrs[1], addrs[0]]  # worker w in task w % 2
        if placement is not None:
            assert placement.launcher.join(10)
    assert outs[3] == outs[1]
    assert all(len(run[0]) for run in outs[1][:1])


def test_a_worker_killed_on_the_second_host_is_named_with_that_host(hosts):
    driver, spaces, addrs = hosts
    placement = RemotePlacement(NetnsLauncher(driver, spaces), start_timeout=60)
    flow = ddflow.Dataflow(workers=2, placement=placement, heartbeat_timeout=5.0)
    hr, he, _ = _reach(flow)
    hr.insert((0,), time=0)
    flow.advance_to(1)
    flow.run()
    pid = flow._pool.pids[1]
    os.kill(pid, signal.SIGKILL)  # namespaces share the pid space: this host can reach the process
    he.insert((0, 1), time=1)
    flow.advance_to(2)
    with pytest.raises(ddflow.WorkerLost, match=rf"worker 1 \(pid {pid} on host {addrs[1]}\) died \(killed by SIGKILL\)"):
        flow.run()
    assert placement.launcher.join(10)
