"""The one way we commit a small file (result, manifest, trace, DALI's epoch ids): atomically.

Readers see the old file or the complete new one, never half of it: the bytes go to a
temporary file in the same folder, are fsynced, and are renamed (or linked) into place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def write_atomic(path: str | Path, write: Callable[[IO[bytes]], object],
                 replace: bool = True, durable: bool = True) -> bool:
    """Commit the bytes ``write`` puts into a file object as ``path``.

    With ``replace=False`` an existing file is kept and False returned: a file another
    process committed first wins. ``durable`` fsyncs before the rename (off for scratch files
    nobody needs after a crash). Raises OSError (the temporary file removed) when the write
    fails, e.g. on a full disk, naming ``path`` when the call that failed named no file (a
    write or flush: "No space left on device" alone says not where).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            write(handle)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # atomic, and fails if the file exists
        except FileExistsError:
            return False
        return True
    except OSError as exc:
        raise named(exc, path) from None
    finally:
        tmp.unlink(missing_ok=True)


def named(exc: OSError, path: str | Path) -> OSError:
    """``exc`` naming ``path`` when it names no file (a failed write or flush), so the one
    sentence a user reads says where; ``exc`` itself otherwise."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror, os.fspath(path))


def write_json_atomic(path: str | Path, doc: Any, replace: bool = True, indent: int | None = 2,
                      sort_keys: bool = False) -> bool:
    """``write_atomic`` of a JSON document (values JSON does not know are written as text)."""
    text = json.dumps(doc, indent=indent, sort_keys=sort_keys, default=str,
                      separators=None if indent is not None else (",", ":"))
    data = (text + "\n").encode()
    return write_atomic(path, lambda handle: handle.write(data), replace)
