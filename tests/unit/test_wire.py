"""The wire counters' parsers on real sample files (tests/data/wire/README.md cites them)
and the per-node verdict's rules (results/node_verdict.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dliobench.results.node_verdict import NodeFacts, node_verdicts
from dliobench.storage.wire import (
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
    assert counter_for(str(tmp_path)) is None


def facts(host: str, wire: int | None, *, waited: bool = True, link: float | None = 40e6,
          cpu: bool = False) -> NodeFacts:
    return NodeFacts(host, waited, 100_000_000, wire, 2.5, link, cpu, "eth0 rx bytes")


@pytest.mark.parametrize(("nodes", "want"), [
    ([facts("a", 98_000_000), facts("b", 40_000_000)], ["client network", "unknown"]),
    ([facts("a", 60_000_000), facts("b", 50_000_000)], ["storage", "storage"]),
    ([facts("a", 60_000_000, cpu=True), facts("b", 50_000_000)], ["client", "unknown"]),
    ([facts("a", 4_000_000), facts("b", 99_000_000)], ["page cache", "client network"]),
    ([facts("a", 60_000_000, waited=False)], ["none"]),
    ([facts("a", None)], ["unknown"]),
    ([facts("a", 60_000_000, link=None)], ["unknown"]),
])
def test_node_verdict_rules(nodes: list[NodeFacts], want: list[str]) -> None:
    got = node_verdicts(nodes)
    assert [got[n.host]["limit"] for n in nodes] == want
    assert all(got[n.host]["reason"] for n in nodes)
