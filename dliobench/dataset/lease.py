"""The data-folder lock where there is no file to ``flock`` (an object store): lock objects
with leases, one writer or many readers as with ``flock``.

The writer's object ``.dliobench.lock`` is created only if absent (the backend's
first-writer-wins ``put``); each reader puts its own ``.dliobench.lock.readers/<token>``.
Each names its holder and the time its lease ends, and is rewritten with a later end while
held. A reader puts its object and then looks for a writer's; a writer creates its object
and then lists the readers' (the lock's folder, never the dataset's): with a store that
reads its own writes (S3, MinIO, ...) one of two that came at once sees the other, and a
reader that sees a writer takes its object back. A dliobench that must wait says so in one
line, naming the holder, and looks again every ``POLL_S``; a waiting writer keeps its
object, so new readers wait behind it. A writer's object whose lease ended, or whose holder
was a process on this host that is gone (a killed generation), is taken over (its
unfinished uploads aborted), by a reader too, which then lets it go; a gone reader's object
is deleted by a writer. Released by deleting the objects (the writer's only if still ours).
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dliobench.base.errors import DatasetError
from dliobench.storage.backend import Backend, drop_leftovers

log = logging.getLogger(__name__)
LEASE_S = 60.0  # a holder that stops renewing loses the lock this long after its last renewal
RENEW_S = 15.0
POLL_S = 1.0  # a waiting dliobench looks again this often (one or two requests)


@dataclass(frozen=True)
class Holder:
    """What a lock object says: who holds it, doing what, until when."""

    owner: str  # host:pid:token
    doing: str
    until: float  # the lease's end, seconds since the epoch

    def encode(self) -> bytes:
        return json.dumps({"owner": self.owner, "doing": self.doing,
                           "until": self.until}).encode()

    @classmethod
    def decode(cls, data: bytes) -> Holder | None:
        try:
            doc = json.loads(data)
            return cls(str(doc["owner"]), str(doc["doing"]), float(doc["until"]))
        except (ValueError, KeyError, TypeError):
            return None

    def gone(self) -> bool:
        """Whether the holder can no longer hold it: its lease ended, or it was a process
        on this host that no longer runs."""
        if self.until < time.time():
            return True
        host, _, rest = self.owner.partition(":")
        pid = rest.partition(":")[0]
        if host != socket.gethostname() or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def who(self) -> str:
        """host:pid and until when, for a sentence."""
        end = time.strftime("%H:%M:%S", time.localtime(self.until))
        return f"{self.owner.rsplit(':', 1)[0]} (its lease runs to {end} unless renewed)"


def gave_up(line: str, wait_s: float) -> str:
    """The sentence of a lock's wait past its bound, from the line said while waiting (it
    names the holder)."""
    return (f"gave up after {wait_s:g} s (storage.lock_wait_s) {line}; let that dliobench "
            "finish or stop it, or raise storage.lock_wait_s (0: no limit)")


class LeaseLock:
    """The lock objects of one data folder this process holds, renewed while held; a wait
    gives up after ``wait_s`` (0: never)."""

    def __init__(self, backend: Backend, key: str, wait_s: float = 0.0) -> None:
        self.backend = backend
        self.key = key
        self.wait_s = wait_s
        self.readers = f"{key}.readers"
        token = secrets.token_hex(4)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{token}"
        self.reader_key = f"{self.readers}/{socket.gethostname()}-{os.getpid()}-{token}"
        self._doing = ""
        self._mine: list[str] = []  # the objects held (two while a reader upgrades)
        self._state = threading.Lock()  # _mine against the renewer
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, exclusive: bool, doing: str) -> None:
        """Hold the writer's object (and no live reader holds one) or a reader's (and no
        live writer holds its); wait, said in one line, until then."""
        self._doing = f"{'written' if exclusive else 'read'} ({doing})"
        self._renewer = threading.Thread(target=self._renew, daemon=True, name="lock-lease")
        self._renewer.start()
        self._wait(self._try_write if exclusive else self._try_read)

    @property
    def exclusive(self) -> bool:
        """Whether this process holds the writer's object."""
        return self.key in self._mine

    def upgrade(self, doing: str) -> bool:
        """Hold the writer's object instead of a reader's; True when it had to wait: for
        readers (holding the writer's object), or for a writer (then holding a reader's
        object again); either may have written meanwhile."""
        self._doing = f"written ({doing})"
        problem = self._try_write()  # the reader's object kept until then: no gap
        if problem is None:
            self._let_go(self.reader_key)
            return False
        self._let_go(self.reader_key)  # two upgrading readers must not wait for each other
        if self.exclusive:  # the writer's object is ours: the readers are waited for
            self._wait(self._try_write, problem)
        else:  # another writer's: its files may be all this run lacked
            self._doing = "read (by a run)"
            self._wait(self._try_read, problem)
        return True

    def share(self) -> None:
        """Say the folder is being read now (the writing is over)."""
        self._doing = "read (by a run)"
        self._hold(self.reader_key)
        self._let_go(self.key)

    def release(self) -> None:
        """Stop renewing and delete the lock objects still ours."""
        if self._renewer is None:
            return
        self._stop.set()
        self._renewer.join()
        self._renewer = None
        for key in list(self._mine):
            self._let_go(key)

    def _wait(self, attempt: Callable[[], str | None], problem: str | None = None) -> None:
        """Try until ``attempt`` succeeds, saying each new thing waited for once."""
        said = ""
        deadline = time.monotonic() + self.wait_s if self.wait_s > 0 else math.inf
        if problem is None:
            problem = attempt()
        while problem is not None:
            head = problem.split(" (")[0]
            if head != said:
                log.warning("%s", problem)
                said = head
            if time.monotonic() >= deadline:
                raise DatasetError(gave_up(problem, self.wait_s))
            time.sleep(POLL_S)
            problem = attempt()

    def _try_write(self) -> str | None:
        """Hold the writer's object, then wait for the live readers: None when done, else
        the line to say while waiting."""
        problem = self._claim()
        if problem is not None:
            return problem
        readers = self._live_readers()
        if readers:
            return (f"waiting for the dliobench runs reading the dataset in "
                    f"{self.backend.describe()} to finish before writing it ({len(readers)}; "
                    f"first: {readers[0].who()})")
        return None

    def _try_read(self) -> str | None:
        """Hold a reader's object while no live writer holds its: None when done, else the
        line to say while waiting. A dead writer's object is taken over (its unfinished
        uploads aborted) and deleted."""
        while True:  # before putting ours (no request wasted), and after
            writer = self._held(self.key)
            if writer is not None and writer.gone():
                if (problem := self._claim()) is not None:
                    return problem
                self._let_go(self.key)
                continue
            if writer is not None:
                self._let_go(self.reader_key)
                return (f"waiting for the writer of the dataset in {self.backend.describe()}"
                        f" to finish (being {writer.doing} by {writer.who()})")
            if self.reader_key in self._mine:
                return None
            self._hold(self.reader_key)

    def _claim(self) -> str | None:
        """Hold the writer's object, taking over a gone holder's: None when held, else the
        line to say while waiting for the live holder."""
        if self.key in self._mine:
            return None
        taken_from: str | None = None
        for _ in range(3):
            if self.backend.put(self.key, self._record(), replace=False):
                with self._state:
                    self._mine.append(self.key)
                break
            held = self._held(self.key)
            if held is None:  # let go meanwhile
                continue
            if not held.gone():
                return (f"waiting for the writer of the dataset in {self.backend.describe()} "
                        f"to finish (being {held.doing} by {held.who()})")
            taken_from = held.owner
            log.warning("taking over the lock %s left by %s",
                        self.backend.describe(self.key), taken_from)
            self.backend.delete(self.key)
        else:
            raise DatasetError(f"the lock {self.backend.describe(self.key)} changed hands "
                               "while it was taken; try again")
        if taken_from is not None:
            # a holder that died may have been writing: its unfinished uploads go (held
            # now, the lock keeps every other writer out of the folder)
            drop_leftovers(self.backend, "", taken_from)
        return None

    def _live_readers(self) -> list[Holder]:
        """The other readers whose lease runs; the objects of gone ones are deleted."""
        live = []
        for key in self.backend.list(self.readers):
            held = None if key == self.reader_key else self._held(key)
            if held is not None and held.gone():
                self.backend.delete(key)
            elif held is not None:
                live.append(held)
        return live

    def _hold(self, key: str) -> None:
        with self._state:
            self.backend.put(key, self._record())
            if key not in self._mine:
                self._mine.append(key)

    def _let_go(self, key: str) -> None:
        """Delete ``key`` if held (the writer's object only if it still names us)."""
        with self._state:
            if key not in self._mine:
                return
            self._mine.remove(key)
        if key == self.key:
            held = self._held(key)
            if held is None or held.owner != self.owner:
                return
        self.backend.delete(key)

    def _record(self) -> bytes:
        return Holder(self.owner, self._doing, time.time() + LEASE_S).encode()

    def _held(self, key: str) -> Holder | None:
        """What the object ``key`` says; None when there is none (an unreadable one is a
        holder that is gone)."""
        size = self.backend.size(key)
        if size is None:
            return None
        try:
            data, _ = self.backend.read_range(key, 0, size)
        except FileNotFoundError:  # let go since
            return None
        return Holder.decode(bytes(data)) or Holder("an unreadable lock object", "", 0.0)

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            with self._state:
                for key in self._mine:
                    try:
                        self.backend.put(key, self._record())
                    except Exception as exc:  # a renewal missed: the next one may get through
                        log.warning("could not renew the lock %s: %s",
                                    self.backend.describe(key), exc)
