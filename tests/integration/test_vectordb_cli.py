"""``dliobench vectordb`` with upstream's verbs and flag names (mlcommons/storage
``mlpstorage_py/cli/vectordb_args.py``@041cfcf3) on the diskann engine: datasize's bytes,
datagen's build (DiskANN's own output kept in the index's build.log, not on the console),
a timed run with upstream's run flags, a server named by --host picking the milvus engine, and
SIGTERM (a partial result) and SIGKILL (``recover``) in the middle of a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import last_result
from tests.vdb_index import keys

ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "dliobench", *argv], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env or dict(os.environ))


def test_datasize_prints_bytes(run_cli: Callable[..., int],
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("vectordb", "datasize", "--dimension", "1536", "--num-vectors", "10000000",
                   "--index-type", "DISKANN", "--num-shards", "10") == 0
    out = capsys.readouterr().out
    assert "798,720,000,000 bytes" in out and "disk_index" in out
    assert run_cli("vectordb", "datasize", "--config", "10m", "--scale", "0.001") == 0
    assert "10,000 x dim=1536" in capsys.readouterr().out  # upstream's 10M, scaled


def test_datagen_keeps_diskanns_output_in_the_build_log(
        tmp_path: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("diskannpy")
    env = {k: v for k, v in os.environ.items() if k != "RUST_LOG"}
    argv = ["vectordb", "datagen", "vectordb.max_degree=16", "vectordb.search_list_size=32",
            "--num-vectors", "1000", "--dimension", "16", "--num-query-vectors", "20",
            "--distribution", "uniform", "--num-shards", "1", "--vector-dtype", "FLOAT_VECTOR",
            "--index-dir", str(tmp_path / "idx"), "--results-dir", str(tmp_path / "r")]
    proc = _cli(*argv, "--force", env=env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    folder = next((tmp_path / "idx").iterdir())
    doc = json.loads((folder / "manifest.json").read_text())
    assert doc["vectors"]["distribution"] == "uniform" and doc["build"]["bytes"] > 0
    assert "INFO" in (folder / "build.log").read_text() and "INFO" not in out
    assert "built diskann DISKANN of 1,000 x 16 uniform vectors" in " ".join(out.split())
    assert run_cli(*argv) == 0  # again, without --force: kept for the runs to reuse
    assert "runs reuse it" in " ".join(capsys.readouterr().out.split())


def test_timed_runs_with_upstreams_run_flags(vdb_index: Path, workdir: Path,
                                              run_cli: Callable[..., int]) -> None:
    assert run_cli("vectordb", "run", *keys(vdb_index), "--query-threads", "2",
                   "--batch-size", "2", "--runtime", "0.3", "--report-count", "10",
                   "--benchmark-mode", "timed", "--search-limit", "10", "--loops", "2",
                   "--results-dir", str(workdir / "r")) == 0
    v = last_result(workdir / "r")["vectordb"]
    assert v["mode"] == "timed" and v["clients"] == 2 and v["batch_size"] == 2
    assert v["queries"] % 2 == 0 and 0.2 < v["window_s"] < 10 and v["valid"]
    (doc,) = [json.loads(p.read_text()) for p in (workdir / "r").glob("runset-*.json")]
    assert doc["family"] == "vectordb" and doc["finished"] == 2  # --loops: one run set
    assert all(r["valid"] and r["qps"] > 0 for r in doc["runs"])


def test_a_server_picks_the_milvus_engine_an_object_store_is_refused(
        run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("vectordb", "run", "--host", "127.0.0.1", "--port", "19530", "--config",
                   "default", "--num-query-processes", "2", "--runtime", "60",
                   "--index-dir", "/nonexistent/vdb") == 2  # no index built: one sentence
    assert "_milvus" in capsys.readouterr().err  # the milvus engine's index folder
    assert run_cli("closed", "vectordb", "run", "object", "--config", "default") == 2
    assert "POSIX reads only" in capsys.readouterr().err


def _started(results: Path, timeout_s: float = 60) -> Path:
    """The run folder once a rank journaled figures (its first second of queries)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for journal in results.glob("*/journal/rank-*.jsonl"):
            if '"vectordb"' in journal.read_text():
                return journal.parents[1]
        time.sleep(0.1)
    raise AssertionError("the run journaled nothing")


def test_sigterm_and_sigkill_mid_run_lose_nothing_measured(vdb_index: Path, tmp_path: Path,
                                                          run_cli: Callable[..., int]) -> None:
    procs = {sig: _cli("vectordb", "run", *keys(vdb_index), "--runtime", "60",
                       "--results-dir", str(tmp_path / sig.name))
             for sig in (signal.SIGTERM, signal.SIGKILL)}  # side by side: the wait is shared
    for sig, proc in procs.items():
        run_dir = _started(tmp_path / sig.name)
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        if sig == signal.SIGTERM:  # the window ends, what was measured is a partial result
            assert proc.returncode == 143
        else:  # nothing ran after the kill: the journals are recovered
            assert proc.returncode == -signal.SIGKILL
            assert not (run_dir / "result.json").exists()
            assert run_cli("recover", str(run_dir)) == 0
        result = json.loads((run_dir / "result.json").read_text())
        v = result["vectordb"]
        assert result["status"] == "partial" and v["queries"] > 0, sig
        assert v["recall"] > 0.9 and v["latency_ms"]["p99"] > 0 and v["latency_hist_ms"]
