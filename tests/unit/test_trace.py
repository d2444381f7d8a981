"""Trace import parts on real captures (tests/data/trace/): strace's text (``worker.strace``,
a PyTorch DataLoader worker's ``np.load`` of one file interleaved with another process's
calls, and the main process receiving a batch) and DFTracer 2.2.0's JSON lines
(``np_load.pfw``, two ``np.load`` calls traced with LD_PRELOAD); our writer and tracing
backend on a real folder; inference of order and workers; the one-sentence errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import ConfigError, InputError
from dliobench.config.load import load as load_config
from dliobench.config.read_requests import Requests
from dliobench.report.trace import dftracer, infer, strace
from dliobench.report.trace.events import OPEN, READ, Event, Trace
from dliobench.report.trace.load import load
from dliobench.storage.posix import PosixBackend
from dliobench.storage.trace_writer import TraceWriter
from dliobench.storage.traced import TracedBackend, traced

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"
NP_LOAD = [(0, 4096), (0, 128), (0, 4096), (4096, 4096), (8192, 1936)]


def test_strace_joins_interrupted_calls_and_follows_dup_by_path() -> None:
    t = load(DATA / "worker.strace")
    reads = [(e.offset, e.size) for e in t.reads({"/data/job/img_014.npy"})]
    assert reads == NP_LOAD  # the 4 reads through the dup'd descriptor 14 included
    assert [e.op for e in t.events if e.op == "batch"] == ["batch"]
    assert {e.pid for e in t.reads({"/data/job/img_014.npy"})} == {7030}


def test_strace_without_y_names_files_from_openat_and_counts_the_rest() -> None:
    lines = ['1 10:00:00.000001 openat(AT_FDCWD, "/d/a.npy", O_RDONLY) = 3 <0.000010>',
             '1 10:00:00.000002 read(3, "\\223NUMPY"..., 4096) = 4096 <0.000010>',
             '1 10:00:00.000003 pread64(3, "x"..., 100, 8192) = 100 <0.000010>',
             '1 10:00:00.000004 read(9, "y"..., 10) = 10 <0.000010>']
    t = strace.read(lines)
    assert [(e.path, e.offset, e.size) for e in t.reads()] == [("/d/a.npy", 0, 4096),
                                                              ("/d/a.npy", 8192, 100)]
    assert "1 reads were on descriptors" in t.notes[0]


def test_strace_threads_are_their_process_when_clone_is_traced() -> None:
    lines = ['1 10:00:00.000001 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|'
             'CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x1}, 88) = 2 <0.000050>',
             '1 10:00:00.000002 clone(child_stack=NULL, flags=CLONE_CHILD_SETTID|SIGCHLD) = 3'
             ' <0.000050>']
    for i, pid in enumerate((1, 2, 3)):
        lines += [f'{pid} 10:00:01.00000{i} openat(AT_FDCWD, "/d/{i}.npy", O_RDONLY) = 5 <0.1>',
                  f'{pid} 10:00:02.00000{i} read(5, "x"..., 4096) = 100 <0.000010>']
    t = strace.read(lines)
    assert [(e.pid, e.tid) for e in t.reads()] == [(1, 1), (1, 2), (3, 3)]
    got = infer.infer(Trace("strace", t.reads()[:2], root_pid=1), batch_size=1,
                      computation_time=0)
    assert got.values["reader.data_loader"] == "native"  # two threads of the first process
    assert got.values["reader.read_threads"] == 2


def test_dftracer_capture_resolves_file_hashes(tmp_path: Path) -> None:
    t = load(DATA / "np_load.pfw")
    assert t.source == "dftracer" and t.root_pid == 25934
    assert [(e.path, e.offset, e.size) for e in t.reads()] == [
        ("/data/job/f0.npy", 0, 1128), ("/data/job/f1.npy", 0, 1128)]
    # a worker killed mid-write leaves a torn gzip: what is complete is read
    packed = gzip.compress((DATA / "np_load.pfw").read_bytes())
    (tmp_path / "t.pfw.gz").write_bytes(packed[: len(packed) * 3 // 4])
    torn = dftracer.read(tmp_path / "t.pfw.gz")
    assert "ends early" in torn.notes[0] and len(torn.reads()) <= 2


def test_our_trace_is_read_as_dftracer_and_replays_exact_requests(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "a.npy", np.arange(10000, dtype=np.uint8).reshape(100, 100) % 251)
    whole = (data / "a.npy").read_bytes()
    pattern = Requests.parse("0+4096,0+128,0+4096,4096+4096,8192+1936@10128")
    backend = TracedBackend(PosixBackend(str(data)), TraceWriter(str(tmp_path / "io")), pattern)
    got, nbytes = backend.read_range("a.npy", 0, len(whole))
    assert bytes(got) == whole and nbytes == 4096 * 3 + 128 + 1936
    assert getattr(backend, "read_wholes", None) is None  # every file through the pattern
    backend.writer.flush()  # type: ignore[union-attr]
    t = load(tmp_path / "io")
    assert [(e.offset, e.size) for e in t.reads()] == NP_LOAD
    assert t.reads()[0].path == str(data / "a.npy")
    assert traced(backend.inner, "", "") is backend.inner  # off: nothing wrapped
    plain = TracedBackend(PosixBackend(str(data)), TraceWriter(str(tmp_path / "io2")), None)
    assert callable(plain.read_wholes)  # type: ignore[attr-defined]
    # reads the tracer would not see: checked in C, or by the C queue's threads
    assert not hasattr(plain, "read_checked") and not hasattr(plain, "submit_checked")
    assert not hasattr(plain, "names")  # files named and read by index in C
    assert not hasattr(TracedBackend(object(), None, None), "read_wholes")  # type: ignore[arg-type]


def test_requests_scale_to_other_sizes_and_refuse_nonsense() -> None:
    r = Requests.parse("0+4096,4096+6032@10128")
    assert r.for_size(20000) == [(0, 4096), (4096, 15904)]  # the last one reaches the end
    assert r.for_size(3000) == [(0, 3000)]
    assert Requests.parse(r.text()).pairs == r.pairs
    for bad in ("0+4096", "x+1@2", "0+0@10", "5+-1@10"):
        with pytest.raises(ConfigError, match=r"reader\.read_requests"):
            Requests.parse(bad)
    with pytest.raises(ConfigError, match="num_samples_per_file: 1"):
        load_config(None, ["reader.read_requests=0+10@10", "dataset.num_samples_per_file=2"])


def _job(order: list[int], pids: list[int]) -> Trace:
    """A trace of files read whole once each in ``order`` by ``pids`` (round robin)."""
    t = Trace("strace", root_pid=1)
    for k, i in enumerate(order):
        path, pid = f"/d/{i:03d}.npy", pids[k % len(pids)]
        t.events += [Event(OPEN, pid, pid, k, 0, path), Event(READ, pid, pid, k, 0, path, 0,
                                                                 1000, 4096)]
    return t


def test_infer_tells_order_and_workers(tmp_path: Path) -> None:
    seq = infer.infer(_job(list(range(30)), [2, 3]), batch_size=3, computation_time=0.01)
    assert seq.values["reader.sample_shuffle"] == "off"
    assert seq.values["reader.read_threads"] == 2 and seq.values["reader.data_loader"] == "pytorch"
    assert seq.values["dataset.num_files_train"] == 30
    assert "reader.read_requests" not in seq.values  # one whole read per file: our own reads
    shuffled = list(np.random.default_rng(1).permutation(30))
    got = infer.infer(_job([int(i) for i in shuffled], [1]), computation_time=0)
    assert got.values["reader.sample_shuffle"] == "seed"
    assert got.values["reader.read_threads"] == 0
    assert any("batch_size" in u for u in got.unknown)  # said, not guessed


def test_unreadable_inputs_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load(tmp_path / "nope")
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(InputError, match="neither strace output"):
        load(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"holds no \.pfw"):
        load(tmp_path / "empty")
    (tmp_path / "py.strace").write_text(
        '1 10:00:00.000001 openat(AT_FDCWD, "/x/a.py", O_RDONLY) = 3 <0.000010>\n'
        '1 10:00:00.000002 read(3, "import"..., 4096) = 40 <0.000010>\n')
    with pytest.raises(InputError, match="no reads of data files"):
        infer.infer(load(tmp_path / "py.strace"))
    (tmp_path / "bad.pfw").write_text(json.dumps({"name": "read", "cat": "POSIX"}) + "\n")
    assert load(tmp_path / "bad.pfw").reads() == []
