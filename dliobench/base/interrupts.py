"""Ctrl-C and SIGTERM taken where the run chooses, not wherever the main thread happens to be.

The run's handlers raise (``KeyboardInterrupt``, ``errors.Terminated``) in the main thread at
whatever line it is on. Inside Python's own thread-pool and lock code that can leave a lock
taken that nobody will release: a SIGTERM while staging once left a run hung for an hour in
``ThreadPoolExecutor.shutdown``, its copy threads waiting on a lock the interrupted main
thread had taken. Around such waits, ``deferred`` only notes the two signals; the waiting
loop calls ``check()`` between waits, where the run's own handler is called again and raises
at a line of ours.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def deferred() -> Iterator[Callable[[], None]]:
    """Inside, SIGINT and SIGTERM are noted, not acted on; the ``check`` yielded hands a noted
    one to the handler it was meant for (which raises there), and leaving the block does the
    same for one noted after the last check. Outside the main thread (thread ranks in tests)
    nothing changes: only the main thread takes Python's signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    noted: list[int] = []
    handlers = {signum: signal.signal(signum, lambda signum, _frame: noted.append(signum))
                for signum in SIGNALS}

    restored: list[bool] = []

    def restore() -> None:  # once: a handler that ran may have changed its own signal since
        if not restored:  # (the run's SIGTERM handler ignores a second one during clean-up)
            restored.append(True)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)

    def check() -> None:
        if noted:
            restore()
            came = list(dict.fromkeys(noted))
            noted.clear()
            for signum in came:  # the handler runs (and raises) inside raise_signal
                signal.raise_signal(signum)

    try:
        yield check
    finally:
        restore()
        check()


_TERM_WHILE_ENDING: list[int] = []


def ending() -> None:
    """This rank is ending on an error of its own (or a lost peer): from here on a SIGTERM is
    only noted (``terminated_while_ending``), so that a launcher's SIGTERM (torchrun sends one
    the moment another rank dies) cannot cut short the saving of what was measured (the
    loader closed, the journal ended, the partial result assembled). The rank still exits
    non-zero, on its own error. Only the main thread takes Python's signal handlers (thread
    ranks in tests change nothing)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, _frame: _TERM_WHILE_ENDING.append(signum))


def terminated_while_ending() -> bool:
    """Whether a SIGTERM came after ``ending``: the launcher has asked this rank to stop."""
    return bool(_TERM_WHILE_ENDING)
