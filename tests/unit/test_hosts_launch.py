"""Placement as mlpstorage does it and the preflight's sentences (comm/hosts_launch.py),
with a probe that answers for the hosts (the real one is ssh: tests/cluster)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dliobench import __version__
from dliobench.base.errors import InputError
from dliobench.comm.hosts_launch import Answer, launch_over_ssh, place, preflight


def test_placement_follows_mlpstorage() -> None:
    # mlcommons/storage mlpstorage/utils.py@caa90c9 generate_mpi_prefix_cmd: N spread evenly,
    # the first N mod H hosts one more; host:slots kept when they hold every rank
    assert place(["a", "b", "c"], 8, None) == [("a", 3), ("b", 3), ("c", 2)]
    assert place(["a:4", "b:4"], 6, None) == [("a", 4), ("b", 4)]
    assert place(["a", "b"], None, 2) == [("a", 2), ("b", 2)]
    with pytest.raises(InputError, match="slots"):
        place(["a:1", "b:1"], 3, None)
    with pytest.raises(InputError, match="host:N for every host or for none, not b"):
        place(["a:2", "b"], 2, None)
    with pytest.raises(InputError, match="--num-accelerators"):
        place(["a"], None, None)


def test_preflight_says_one_sentence_per_host_that_cannot(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest"
    manifest.write_text("x")
    import hashlib
    sha = hashlib.sha256(b"x").hexdigest()
    good = Answer(time.time(), 64 << 30, True, sha, __version__)
    answers = {
        "ok": good,
        "down": Answer(error="Connection refused"),
        "old": Answer(time.time(), 64 << 30, True, sha, "0.0.1"),
        "nowork": Answer(time.time(), 64 << 30, True, sha, __version__, missing=("/w.yaml",)),
        "blind": Answer(time.time(), 64 << 30, False, "-", __version__),
        "other": Answer(time.time(), 64 << 30, True, "abc", __version__),
        "small": Answer(time.time(), 1 << 30, True, sha, __version__),
        "late": Answer(time.time() - 5, 64 << 30, True, sha, __version__),
    }
    placement = [(h, 2) for h in answers]
    got = preflight(placement, lambda h: answers[h], "/data", manifest, 2 << 30)
    words = ["unreachable", "0.0.1", "does not see /w.yaml", "does not see the data folder",
             "manifest differs", "GiB available",
             "clock is -5"]
    assert len(got) == len(words)
    for sentence, word in zip(got, words, strict=True):
        assert word in sentence, sentence
    with pytest.raises(InputError, match="cannot start on every host: down"):
        launch_over_ssh("mpiexec", placement, ["run"], got)
