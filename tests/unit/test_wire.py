"""The wire counters' parsers on real sample files (tests/data/wire/README.md cites them),
the per-node verdict's rules (results/node_verdict.py) and the per-node figures a result
takes from its ranks' meters (results/node_wire.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dliobench.results.measured import RankTrace
from dliobench.results.node_verdict import NodeFacts, node_verdicts
from dliobench.results.node_wire import add_wire, wire_total
from dliobench.results.timeline import Timeline
from dliobench.results.verdict import Bar
from dliobench.storage.devreads import DeviceMeter, DeviceReads
from dliobench.storage.wire import (
    WireCounter,
    counter_for,
    parse_llite_stats,
    parse_mountstats,
    parse_net_dev,
    server_of,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "wire"


def test_nfs_mountstats_gives_serverreadbytes_of_the_nfs_mount_only() -> None:
    # prometheus/procfs testdata/fixtures.ttar@3c943fd: "bytes: 1207640230 0 0 0 1210214218 ..."
    assert parse_mountstats((DATA / "mountstats").read_text()) == {"/mnt/nfs/test": 1210214218}


def test_lustre_llite_stats_gives_the_read_bytes_sum() -> None:
    # HewlettPackard/lustre_exporter ...llite/lustrefs-ffff88105db50000/stats@63e0aba:
    # "read_bytes 1 samples [bytes] 4194304 4194304 4194304"
    assert parse_llite_stats((DATA / "llite_stats").read_text()) == 4194304
    assert parse_llite_stats("snapshot_time 1.0 secs.nsecs\nopen 3 samples [regs]\n") == 0


def test_net_dev_gives_rx_bytes_per_interface() -> None:
    assert parse_net_dev((DATA / "net_dev").read_text()) == {"lo": 0, "eth0": 438}


def test_a_local_folder_has_no_wire_counter(tmp_path: Path) -> None:
    assert server_of("/dev/vda") is None and server_of("tmpfs") is None
    assert server_of("127.100.1.1:/dliobench") == "127.100.1.1"
    assert server_of("//127.0.0.2/share") == "127.0.0.2"
    assert server_of("10.0.0.5@tcp:/lustre") == "10.0.0.5"
    assert counter_for(str(tmp_path)) is None


def facts(host: str, wire: int | None, *, waited: bool = True, link: float | None = 40e6,
          cpu: bool = False, waiting: tuple[int, float] = (0, 0.0)) -> NodeFacts:
    return NodeFacts(host, waited, 100_000_000, wire, 2.5, link, cpu, "eth0 rx bytes",
                     *waiting)


@pytest.mark.parametrize(("nodes", "want"), [
    ([facts("a", 98_000_000), facts("b", 40_000_000)], ["client network", "unknown"]),
    ([facts("a", 60_000_000), facts("b", 50_000_000)], ["storage", "storage"]),
    ([facts("a", 60_000_000, cpu=True), facts("b", 50_000_000)], ["client", "unknown"]),
    ([facts("a", 4_000_000), facts("b", 99_000_000)], ["page cache", "client network"]),
    ([facts("a", 60_000_000, waited=False)], ["none"]),
    ([facts("a", None)], ["unknown"]),
    ([facts("a", 60_000_000, link=None)], ["unknown"]),
    # partly cached: 80 % over the wire, the link idle while cached batches were read and
    # full while the ranks waited for the rest
    ([facts("a", 80_000_000, waiting=(39_000_000, 1.0))], ["client network"]),
    # the storage holds the link at 87 %, waits or not
    ([facts("a", 87_000_000, waiting=(34_800_000, 1.0))], ["storage"]),
])
def test_node_verdict_rules(nodes: list[NodeFacts], want: list[str]) -> None:
    got = node_verdicts(nodes)
    assert [got[n.host]["limit"] for n in nodes] == want
    assert all(got[n.host]["reason"] for n in nodes)


def trace(rank: int, host: str, wire: int | None, counter: str = "eth0 rx bytes") -> RankTrace:
    t = RankTrace(rank, host, Timeline(rank))
    t.device_reads = DeviceReads(None, "fuse.glusterfs has no block device", 100 + rank, wire,
                                 counter, 2.0, 40e6, "tc tbf on eth0")
    return t


def test_a_node_s_figures_are_its_ranks_largest_and_the_run_takes_the_wire() -> None:
    traces = [trace(0, "a", 78_000_000), trace(1, "a", 77_000_000), trace(2, "b", 3_000_000)]
    nodes: list[dict[str, Any]] = [
        {"host": "a", "au": 0.5, "cpu_share": 0.2, "host_cpu_busy_share": 0.3},
        {"host": "b", "au": 1.0, "cpu_share": 0.2, "host_cpu_busy_share": 0.3}]
    add_wire(nodes, traces, {"a": 75_000_000, "b": 75_000_000}, Bar(0.9, 10.0, None, 0.9))
    a, b = nodes
    assert a["wire_bytes"] == 78_000_000 and a["link_use"] == pytest.approx(0.975)
    assert a["verdict"]["limit"] == "client network"
    assert b["verdict"]["limit"] == "page cache" and b["wire_share"] == pytest.approx(0.04)
    assert wire_total(traces) == (81_000_000, "the wire to 2 node(s): eth0 rx bytes")
    assert wire_total([*traces, trace(3, "c", None)]) is None  # one node without a counter


def test_the_wire_is_read_while_the_rank_waits(tmp_path: Path) -> None:
    """A link that runs full (40 MB/s) only between 0.1 and 0.3 s: a wait over that span saw
    it full, a wait after it saw it idle."""
    start = time.perf_counter()

    def counter() -> int:
        busy = min(max(time.perf_counter() - start - 0.1, 0.0), 0.2)
        return int(40e6 * busy)

    meter = DeviceMeter(str(tmp_path))
    meter.wire, meter.link = WireCounter("eth0 rx bytes", "eth0", counter), (40e6, "tc")
    meter.open()
    time.sleep(0.45)
    meter.close()
    full, idle = (start + 0.12, start + 0.28), (start + 0.32, start + 0.42)
    crossed, seconds = meter.wire_during([full]) or (0, 0.0)
    assert seconds == pytest.approx(0.16)
    assert crossed / seconds / 40e6 == pytest.approx(1, abs=0.15)
    assert (meter.wire_during([idle]) or (1, 0.0))[0] < 0.05 * 40e6 * 0.1
    reads = meter.result(lambda: [full, (start + 5, start + 6)])  # the second: no window
    assert reads.wire_wait_s == pytest.approx(0.16) and reads.wire_wait_bytes
