"""The issue's acceptance: a real PyTorch training loop (``tests/data/trace_train.py``: a
``Dataset`` of ``np.load``, a ``DataLoader``, a small ``nn.Module``) is traced, the trace
imported as a workload, the workload replayed with ``--trace-io``, and the replay's I/O
matches the trace: files touched the same, bytes and requests per epoch within 2 %, the
request-size histogram in the same bins (``workload compare`` exits 0 only then).

The loader has 2 worker processes and shuffles. Under DFTracer (2.2.0) the job is
instrumented as DFTracer's users do (``--dftracer``: pydftracer's ``initialize_log`` in the
main process and each worker, the training step a ``compute`` region): with the LD_PRELOAD
library alone a forked worker's events are never written (docs/trace.md, "DFTracer").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dliobench.report.trace import compare
from dliobench.report.trace.load import load

TRAIN = Path(__file__).resolve().parents[1] / "data" / "trace_train.py"
HANG = 300  # a hang guard: the job takes ~4 s of CPU (torch's import), strace doubles it

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # a real PyTorch job (torch's import) traced, then a replay


def _files(folder: Path, n: int = 20) -> Path:
    """``n`` real .npy images, 100 x 100 uint8 (10,128-byte files)."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(n):
        np.save(folder / f"img_{i:03d}.npy", rng.integers(0, 255, (100, 100), dtype=np.uint8))
    return folder


def _replay(tmp_path: Path, trace: Path, run_cli: Callable[..., int], *extra: str) -> Path:
    """Import ``trace``, run the workload with --trace-io; the run's folder."""
    job = tmp_path / "job.yaml"
    assert run_cli("workload", "from-trace", str(trace), "-o", str(job), *extra) == 0
    out = tmp_path / "out"
    assert run_cli("run", str(job), f"dataset.data_folder={tmp_path / 'replay'}",
                   f"output.folder={out}", "metric.client_ceiling=off", "--no-progress",
                   "--trace-io") == 0
    (run_dir,) = out.iterdir()
    return run_dir


def _same_io(trace: Path, run_dir: Path) -> None:
    t, r = compare.trace_side(load(trace)), compare.replay_side(run_dir)
    assert r.files == t.files == 20
    assert r.bytes == pytest.approx(t.bytes, rel=0.02)
    assert r.requests == pytest.approx(t.requests, rel=0.02)
    assert set(r.bins) == set(t.bins)


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_strace_of_a_pytorch_job_replays_with_the_same_io(
        tmp_path: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    data = _files(tmp_path / "data")
    trace = tmp_path / "job.strace"
    # --seccomp-bpf: only the traced calls stop the job (the same lines; 8.5-10.9 s -> 4.2-4.8)
    subprocess.run(["strace", "-f", "--seccomp-bpf", "-tt", "-T", "-y", "-e",
                    "trace=openat,read,pread64,lseek,close,clone,clone3", "-o", str(trace),
                    sys.executable, str(TRAIN), str(data), "--workers", "2", "--shuffle",
                    "--epochs", "2"],
                   check=True, timeout=HANG, capture_output=True)
    run_dir = _replay(tmp_path, trace, run_cli)
    said = capsys.readouterr().out
    assert 'reader.read_threads = 2' in said and 'reader.sample_shuffle = "seed"' in said
    assert "reader.batch_size = 4" in said and "train.epochs = 2" in said
    _same_io(trace, run_dir)
    config = json.loads((run_dir / "result.json").read_text())["config"]
    assert config["train"]["computation_source"].startswith("trace (strace): mean of the time")
    assert load(trace).reads() and compare.trace_side(load(trace)).requests == 5 * 20
    # np.load reads a 10,128-byte file in 5 requests (4096 buffered, 128 header, 4096,
    # 4096, 1936 through a dup of the descriptor): the replay issues the same 5
    assert run_cli("workload", "compare", str(trace), str(run_dir)) == 0
    assert "within 2%: all" in capsys.readouterr().out


def _has_dftracer() -> bool:
    try:
        import dftracer.python  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_dftracer(), reason="dftracer is not installed (extra: trace)")
def test_dftracer_trace_of_a_pytorch_job_replays_with_the_same_io(
        tmp_path: Path, run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> None:
    data = _files(tmp_path / "data")
    logs = tmp_path / "pfw"
    env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INIT="FUNCTION",
               DFTRACER_INC_METADATA="1", DFTRACER_DATA_DIR=str(data),
               DFTRACER_LOG_FILE=str(logs / "job"))
    subprocess.run([sys.executable, str(TRAIN), str(data), "--workers", "2", "--shuffle",
                    "--epochs", "2", "--dftracer"], check=True, timeout=HANG,
                   capture_output=True, env=env)
    run_dir = _replay(tmp_path, logs, run_cli)
    said = capsys.readouterr().out
    assert "reader.read_threads = 2" in said and "reader.batch_size = 4" in said  # regions
    _same_io(logs, run_dir)
    # DFTracer sees one read per np.load (the buffered 4096 bytes); the rest goes through a
    # dup of the descriptor, which its interception does not follow: the replay reads the same
    assert compare.trace_side(load(logs)).requests == 20
    assert run_cli("workload", "compare", str(logs), str(run_dir)) == 0
