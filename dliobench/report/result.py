"""The result of a run: ``result.json`` (schema below) and ``timeline.csv``, written atomically.

The keys are an interface: scripts and ``dliobench report`` read them (see README).
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from dliobench.config_schema import Config
from dliobench.errors import DlioBenchError

SCHEMA_VERSION = 1


def new_run_id(workload: str) -> str:
    """``YYYYmmdd-HHMMSS-<workload>-<6 hex>``."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in workload) or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-{secrets.token_hex(3)}"


def config_dict(config: Config) -> dict[str, Any]:
    """The resolved configuration as plain data."""
    out = dataclasses.asdict(config)
    out.pop("source", None)
    return out


def write_json_atomic(path: Path, doc: dict[str, Any], replace: bool = True) -> bool:
    """Write JSON so that readers see the old file or the complete new one, never half.

    With ``replace=False`` an existing file is kept (and False returned): a file another
    process wrote first wins.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as handle:
            json.dump(doc, handle, indent=2, sort_keys=False, default=str)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(tmp, path)
            return True
        try:
            os.link(tmp, path)  # atomic, and fails if the file exists
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        return True
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DlioBenchError(f"cannot write {path}: {exc.strerror}; free space or choose "
                             "another output.folder") from None


def read_result(run_dir: str | Path) -> dict[str, Any]:
    """Load a run's result.json."""
    with open(Path(run_dir) / "result.json") as handle:
        doc: dict[str, Any] = json.load(handle)
    return doc
