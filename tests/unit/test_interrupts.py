"""Ctrl-C and SIGTERM are taken where the run checks for them, not inside Python's locking.

The main thread signals itself with ``signal.raise_signal`` (delivered before the call
returns). Ctrl-C is Python's own ``default_int_handler`` in these tests, whatever the suite
inherited: a suite started in the background by a shell without job control (``pytest &``)
inherits SIGINT ignored, and Python then leaves it ignored."""

from __future__ import annotations

import os
import signal
import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from dliobench.base import interrupts
from dliobench.base.errors import Terminated
from dliobench.comm.world import World
from dliobench.dataset import staging
from dliobench.storage import backend_for
from dliobench.storage.posix import PosixBackend


@pytest.fixture
def terminate_raises() -> Iterator[None]:
    """SIGTERM raises ``Terminated``, as the run's handler does (restored afterwards)."""
    def handler(signum: int, frame: object) -> None:
        raise Terminated("terminated by SIGTERM")

    before = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_signal_inside_is_taken_at_the_check(terminate_raises: None) -> None:
    reached = []
    with pytest.raises(Terminated), interrupts.deferred() as check:
        signal.raise_signal(signal.SIGTERM)
        reached.append("after the signal")  # only noted: this line runs
        check()
        reached.append("after the check")
    assert reached == ["after the signal"]


@pytest.fixture
def interrupt_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt``, as in a run started from a terminal."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_signal_after_the_last_check_is_taken_on_leaving(terminate_raises: None,
                                                           interrupt_raises: None) -> None:
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), interrupts.deferred() as check:
        check()  # nothing noted: nothing happens
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is handler  # the run's handlers are back


def test_no_signal_changes_nothing(terminate_raises: None) -> None:
    handlers = [signal.getsignal(s) for s in interrupts.SIGNALS]
    with interrupts.deferred() as check:
        check()
    assert [signal.getsignal(s) for s in interrupts.SIGNALS] == handlers


class SignalsOnFirstRead(PosixBackend):
    """A folder whose first read (in a copy thread, while the main thread waits) sends this
    process SIGTERM."""

    signalled = threading.Event()

    def read_range(self, key: str, offset: int, length: int,
                   direct: bool = False) -> tuple[memoryview, int]:
        if not self.signalled.is_set():
            self.signalled.set()
            os.kill(os.getpid(), signal.SIGTERM)
        return super().read_range(key, offset, length, direct)


def test_sigterm_while_staging_is_raised_in_our_code_and_leaves_no_copy(
        tmp_path: Path, terminate_raises: None) -> None:
    """The signal arrives while the main thread waits for the copy threads. Before, the
    handler raised inside ``concurrent.futures``/``threading`` waits, where an exception can
    leave a lock taken (a run once hung for an hour in the pool's shutdown); now it is
    raised by ``interrupts.check``, no copy is left and the copy threads are gone."""
    source = tmp_path / "source"
    source.mkdir()
    keys = [f"f{i}.bin" for i in range(400)]
    for key in keys:
        (source / key).write_bytes(os.urandom(4096))
    staged = tmp_path / "staged"
    src, dst = SignalsOnFirstRead(str(source)), backend_for(str(staged))
    with pytest.raises(Terminated) as caught:
        staging._copy_all(src, dst, keys, 2, staged, World.single())
    frames = [frame.filename for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert not [f for f in frames if f.endswith(("threading.py", "_base.py", "thread.py"))], \
        frames
    assert any(f.endswith("interrupts.py") for f in frames), frames
    assert not staged.exists()
    assert not [t for t in threading.enumerate() if t.name.startswith("stage")]


def test_a_handler_that_ignores_its_signal_afterwards_is_not_undone() -> None:
    """The run's SIGTERM handler ignores a second SIGTERM while it cleans up; leaving the
    block must not put the handler back over that."""
    def terminate(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated("terminated by SIGTERM")

    before = signal.signal(signal.SIGTERM, terminate)
    try:
        with pytest.raises(Terminated), interrupts.deferred() as check:
            signal.raise_signal(signal.SIGTERM)
            check()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_sigterm_while_a_rank_is_ending_is_only_noted(terminate_raises: None) -> None:
    """torchrun SIGTERMs a rank the moment its peer dies, while the rank, failing on the lost
    peer, assembles the partial result: the signal must not cut that short (it once did, and
    no result was written), yet the rank knows it was asked to stop."""
    assert not interrupts.terminated_while_ending()
    interrupts.ending()
    signal.raise_signal(signal.SIGTERM)
    saved = ["the partial result"]  # a Terminated raised by the handler would skip this line
    assert saved and interrupts.terminated_while_ending()
    interrupts._TERM_WHILE_ENDING.clear()  # this process goes on with other tests
