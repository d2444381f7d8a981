"""Per-node truth without a cluster: real journals of four ranks on two hosts, one host's gone
silent (``results.lost``), and the per-node figures and straggler node (``results.nodes``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from dliobench.results.journal import Journal, journal_path
from dliobench.results.lost import lost
from dliobench.results.measured import RankTrace
from dliobench.results.nodes import machines_memory, per_node, straggler_nodes
from dliobench.results.timeline import Timeline


def _journals(run_dir: Path, hosts: list[str]) -> list[Journal]:
    return [Journal(journal_path(run_dir, r), RankTrace(r, h, Timeline(r)), every_s=0.05)
            for r, h in enumerate(hosts)]


def test_a_node_whose_ranks_all_went_silent_is_named_and_the_lowest_survivor_speaks(
        tmp_path: Path) -> None:
    journals = _journals(tmp_path, ["node-0", "node-0", "node-1", "node-1"])
    try:
        old = time.time() - 30  # node-1's processes died 30 s ago: no heartbeat since
        for rank in (2, 3):
            journals[rank].close("complete")
            path = journal_path(tmp_path, rank)
            path.write_bytes(path.read_bytes().rsplit(b"\n", 2)[0] + b"\n")  # no end record
            os.utime(path, (old, old))
        time.sleep(0.2)  # node-0's ranks live: their journals' heartbeats stay fresh
        found = lost(tmp_path)
        assert found is not None and found.speaker == 0
        assert found.words.startswith("node node-1 (ranks 2, 3) stopped")
        os.utime(journal_path(tmp_path, 3), None)  # rank 3 alive after all: one rank lost
        found = lost(tmp_path)
        assert found is not None and found.words.startswith("rank 2 on node-1 stopped")
        os.utime(journal_path(tmp_path, 3), (old, old))
        journals[0].close("stalled")  # rank 0 spoke and journaled its end: it stays the
        found = lost(tmp_path)  # speaker, so rank 1 does not say it a second time
        assert found is not None and found.speaker == 0
    finally:
        for journal in journals:
            journal.close("complete")


def _rank(rank: int, host: str, rate: float) -> dict[str, object]:
    return {"rank": rank, "host": host, "au": 0.9, "samples": 10, "bytes": 100,
            "samples_per_s": rate, "bytes_per_s": 10 * rate, "wait_s": 1.0, "wall_s": 4.0,
            "cpu_share": 0.5}


def test_per_node_figures_name_the_straggler_and_count_each_machine_once() -> None:
    per_rank = [_rank(0, "a", 100), _rank(1, "a", 100), _rank(2, "b", 100), _rank(3, "b", 100),
                _rank(4, "c", 60), _rank(5, "c", 60)]
    traces = [RankTrace(r["rank"], r["host"], Timeline(0), machine_id="m1" if r["host"] != "c"
                        else "m2", memory_bytes=8 << 30) for r in per_rank]  # type: ignore[arg-type]
    staging = {"nodes": [{"host": "a", "files": 4, "bytes": 400, "seconds": 1.5}]}
    nodes = per_node(per_rank, traces, staging)
    assert [(n["host"], n["ranks"], n["samples"], n["wait_share"]) for n in nodes] == [
        ("a", [0, 1], 20, 0.25), ("b", [2, 3], 20, 0.25), ("c", [4, 5], 20, 0.25)]
    assert nodes[0]["staging_s"] == 1.5 and nodes[1]["staging_s"] is None
    assert straggler_nodes(nodes) == ["c"]
    assert machines_memory(traces) == 2 * (8 << 30)  # hosts a and b are one machine
