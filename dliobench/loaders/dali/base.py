"""What the DALI loader's feeds share: DALI's API, worker errors, host copies, shutdown."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from dliobench.base import interrupts
from dliobench.base.errors import DatasetError, DlioBenchError, MissingExtraError
from dliobench.loaders.base import Batch

try:
    import nvidia.dali.fn as dali_fn
    from nvidia.dali import pipeline_def as dali_pipeline_def
    from nvidia.dali.types import BatchInfo, SampleInfo  # noqa: F401 - for dali_source
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("NVIDIA DALI", "dali") from exc

# Used untyped: DALI's stubs reject documented calls (device_id=None for a CPU-only
# pipeline, reader outputs by feature name).
fn: Any = dali_fn
pipeline_def: Any = dali_pipeline_def

_ERROR_MARK = "dliobench error, exit code "


def worker_error(exc: DlioBenchError) -> RuntimeError:
    """What a worker raises for ``exc``: DALI hands only ``RuntimeError(str(exc))`` over."""
    return RuntimeError(f"{_ERROR_MARK}{exc.exit_code}: {exc}")


def unwrap_worker_error(exc: BaseException) -> DlioBenchError | None:
    """The dliobench error a worker raised, from DALI's exception, to show in one line."""
    text = str(exc.__cause__ or "")
    if not text.startswith(_ERROR_MARK):
        return None
    code, _, message = text[len(_ERROR_MARK):].partition(": ")
    error = DlioBenchError(message)
    error.exit_code = int(code)
    return error


def reader_error(exc: RuntimeError) -> DatasetError | None:
    """A DALI reader's failure to read a file (DALI's pipeline error: its C++ assertion,
    naming the file, inside a traceback of the pipeline) as one sentence; None when the
    error names no file."""
    text = str(exc)
    found = re.search(r'Assert on ".*?" failed: (.*?)(?:\.+ File: (\S+))?$', text, re.M)
    if found is not None:
        reason, path = found.group(1).strip().rstrip("."), found.group(2)
    else:  # DALI 1.5x: "encountered:\n\nFile mapping failed: /path\nC++ context: ..."
        found = re.search(r"^encountered:\s*\n(?:\s*\n)*(.+?): (/\S+)\s*$", text, re.M)
        if found is None:
            return None
        reason, path = found.group(1).strip().rstrip("."), found.group(2)
    if path is None and not re.search(r"file", reason, re.I):
        return None
    said = f"could not read {path}: {reason}" if path else f"failed: {reason}"
    return DatasetError(f"DALI's reader {said}; check the file system, or regenerate the "
                        "dataset with `dliobench generate`")


def host_samples(data: Any) -> list[np.ndarray]:
    """The samples of a DALI CPU TensorList, copied out of DALI's reusable buffers."""
    if data.is_dense_tensor():
        return list(data.as_array())  # one copy of the whole batch
    return [np.array(sample) for sample in data]


def start_method(context: str, deviations: list[str]) -> str:
    """DALI's worker start method for ``reader.multiprocessing_context`` (fork or spawn)."""
    if context in ("fork", "spawn"):
        return context
    deviations.append(f"DALI's Python workers have no '{context}' start method; they use spawn")
    return "spawn"


CLOSE_GRACE_S = 10.0  # a worker still reading a sample this long after close is killed


@contextlib.contextmanager
def workers_ignore_interrupts() -> Iterator[None]:
    """Start DALI's Python workers inside: SIGINT and SIGTERM never reach them.

    Ctrl-C (and a batch system's SIGTERM) reach the whole process group: workers that took
    them printed their tracebacks and died, and the run then failed with DALI's "Sending
    tasks to workers failed" (or, spawned, hung in DALI's close) instead of ending as
    interrupted. The two signals are blocked while the workers start, so the workers inherit
    the blocked mask (fork and spawn alike) and never take them; the run stops them in
    ``release`` (and ``die_with_parent`` when it is killed). Meanwhile the run's own handlers
    are replaced by one that notes the signal, and a noted signal is raised again once the
    workers are started (``interrupts.deferred``): the kernel may hand a process-wide signal
    to another thread of the run (a reader, the watchdog, DALI's), which does not block it,
    and ignoring it there (SIG_IGN, as before) lost a Ctrl-C now and then. Only the main
    thread takes signals; elsewhere (thread ranks in tests) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with interrupts.deferred():  # noted, then handed to the run's handlers on leaving
        before = signal.pthread_sigmask(signal.SIG_BLOCK, interrupts.SIGNALS)  # inherited
        try:
            yield
        finally:  # one held for this thread arrives now, and is noted too
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


def release(pipe: Any) -> None:
    """Stop a pipeline now: its executor, then its Python worker processes.

    DALI has no public close; this is what its ``__del__`` and its pool's finalizer do when
    the pipeline is collected, in the same order (the reverse can fail in DALI's shutdown).
    Workers do not take SIGTERM (``workers_ignore_interrupts``), so the ones DALI's close would
    terminate are killed after ``CLOSE_GRACE_S``.
    """
    pool = getattr(pipe, "_py_pool", None)
    # armed before the executor's shutdown too: it may wait for workers that no longer
    # answer (a Ctrl-C once hung a run there for over 60 s)
    stragglers = threading.Timer(CLOSE_GRACE_S, _kill,
                                 [list(pool.pids()) if pool is not None else []])
    stragglers.daemon = True
    stragglers.start()
    try:
        shutdown = getattr(pipe, "_shutdown", None)
        if shutdown is not None:
            shutdown()
        if pool is not None:
            pool.close()
    finally:
        stragglers.cancel()


def _kill(pids: list[int]) -> None:
    """SIGKILL the worker processes still there (children not yet reaped: no pid reuse)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Feed(Protocol):
    """Runs one DALI pipeline epoch by epoch: the external source's or a DALI reader's."""

    @property
    def deviations(self) -> list[str]:
        """How the delivered samples depart from the plan, in words."""

    def start(self, ids: np.ndarray) -> None:
        """Begin an epoch whose plan is ``ids``."""

    def left(self) -> int:
        """Pipeline runs left in DALI's epoch."""

    def skip(self) -> None:
        """Run the pipeline once and discard the batch."""

    def next_batch(self) -> Batch | None:
        """The epoch's next batch, or None when there is none to hand on."""

    def close(self) -> None:
        """Release the pipeline, its worker processes and files."""
