"""How busy a host's CPUs were over the counted windows (``results.hostcpu``): the kernel's
/proc/stat, per host, ranks that measured the same CPUs counted once."""

from __future__ import annotations

import os
import time

from dliobench.results.hostcpu import CpuMeter, HostCpu, busiest, host_busy
from dliobench.results.verdict import Bar, verdict


def test_a_meter_counts_this_hosts_cpus_over_its_windows() -> None:
    meter = CpuMeter()
    assert set(meter.cpus) == os.sched_getaffinity(0)
    meter.open()
    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:  # busy: this CPU, at least, works the whole window
        pass
    meter.close()
    meter.close()  # a close without an open adds nothing
    got = meter.result()
    assert got is not None and got.total > 0 and 0 < got.busy <= got.total


def test_ranks_that_shared_cpus_count_once_and_bound_ranks_add_up() -> None:
    shared = HostCpu(90, 100, (0, 1))
    assert host_busy([("a", shared), ("a", HostCpu(45, 50, (0, 1)))]) == {"a": 0.9}
    bound = host_busy([("a", HostCpu(50, 50, (0,))), ("a", HostCpu(10, 50, (1,))),
                       ("b", None)])
    assert bound == {"a": 0.6, "b": None}
    assert busiest(bound) == ("a", 0.6) and busiest({"b": None}) is None


def test_the_busy_host_judges_a_run_that_waited_and_an_old_result_still_reads() -> None:
    metrics = {"au": 0.4}
    shares = {"compute": 0.4, "wait": 0.55, "comm": 0.0, "checkpoint": 0.0, "other": 0.05}
    bar = Bar(0.9, 100.0, cpu_busy=0.9)  # metric.client_cpu_busy at its default
    busy = verdict(bar, metrics, shares, None, {"n1": 0.5, "n2": 0.93})
    assert busy["limiter"] == "client" and busy["host_cpu_busy_host"] == "n2"
    assert "the CPUs of n2 were 93% busy over the counted window" in busy["reason"]
    assert verdict(bar, metrics, shares, None, {"n1": 0.89})["limiter"] == "storage"
    assert verdict(Bar(0.9, 100.0), metrics, shares, None,
                   {"n1": 1.0})["limiter"] == "storage"  # metric.client_cpu_busy: off
    old = verdict(bar, metrics, shares, None, {})  # a result before 1.12: no host figure
    assert old["limiter"] == "storage" and old["host_cpu_busy_share"] is None
