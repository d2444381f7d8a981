"""The data-folder lock where there is no file to ``flock`` (an object store): a lock object
with a lease.

The lock object ``.dliobench.lock`` is created only if absent (the backend's first-writer-wins
``put``), names its holder and the time its lease ends, and is rewritten with a later end
while held. A second dliobench finds it and is refused with a sentence naming the holder; a
lock whose lease ended, or whose holder was a process on this host that is gone (a killed
generation), is taken over. Released by deleting it (if still ours).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass

from dliobench.errors import DatasetError
from dliobench.storage.backend import Backend, drop_leftovers

log = logging.getLogger(__name__)
LEASE_S = 60.0  # a holder that stops renewing loses the lock this long after its last renewal
RENEW_S = 15.0


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


class LeaseLock:
    """The lock object of one data folder, held by this process while renewed."""

    def __init__(self, backend: Backend, key: str) -> None:
        self.backend = backend
        self.key = key
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._doing = ""
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, exclusive: bool, doing: str) -> None:
        """Create the lock object, or raise DatasetError naming whoever holds it."""
        self._doing = f"{'written' if exclusive else 'read'} ({doing})"
        taken_from: str | None = None
        for _ in range(3):
            if self.backend.put(self.key, self._record(), replace=False):
                self._renewer = threading.Thread(target=self._renew, daemon=True,
                                                 name="lock-lease")
                self._renewer.start()
                if taken_from is not None:
                    # a holder that died may have been writing: its unfinished uploads go
                    # (held now, the lock keeps every other writer out of the folder)
                    drop_leftovers(self.backend, "", taken_from)
                return
            held = self._held()
            if held is None or held.gone():
                taken_from = held.owner if held else "an unreadable lock object"
                log.warning("taking over the lock %s left by %s",
                            self.backend.describe(self.key), taken_from)
                self.backend.delete(self.key)
                continue
            end = time.strftime("%H:%M:%S", time.localtime(held.until))
            raise DatasetError(
                f"the dataset in {self.backend.describe()} is being {held.doing} by "
                f"{held.owner.rsplit(':', 1)[0]} (its lease runs to {end} unless renewed); "
                "wait until it has finished or use another dataset.data_folder")
        raise DatasetError(f"the lock {self.backend.describe(self.key)} changed hands while "
                           "it was taken; try again")

    def share(self) -> None:
        """Say the folder is being read now (the writing is over)."""
        self._doing = "read (by a run)"
        self.backend.put(self.key, self._record())

    def release(self) -> None:
        """Stop renewing and delete the lock object if it is still ours."""
        if self._renewer is None:
            return
        self._stop.set()
        self._renewer.join()
        self._renewer = None
        held = self._held()
        if held is not None and held.owner == self.owner:
            self.backend.delete(self.key)

    def _record(self) -> bytes:
        return Holder(self.owner, self._doing, time.time() + LEASE_S).encode()

    def _held(self) -> Holder | None:
        size = self.backend.size(self.key)
        if size is None:
            return None
        data, _ = self.backend.read_range(self.key, 0, size)
        return Holder.decode(bytes(data))

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_S):
            try:
                self.backend.put(self.key, self._record())
            except Exception as exc:  # a renewal missed: the next one may get through
                log.warning("could not renew the lock %s: %s",
                            self.backend.describe(self.key), exc)
