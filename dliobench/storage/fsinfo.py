"""What a POSIX folder is stored on: file system, mount, device, free and total bytes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any


def _unescape(field: str) -> str:
    """Mount points in /proc/self/mountinfo escape spaces and such as octal."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def existing(path: str | Path) -> str:
    """``path`` or its nearest existing ancestor."""
    path = os.fspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def mount_of(path: str | Path) -> dict[str, Any]:
    """File-system type, mount point and source device of the mount holding ``path``."""
    target = existing(os.path.realpath(path))
    best: dict[str, Any] = {"fs_type": "unknown", "mount": "/", "device": "unknown"}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return best
    best_len = -1
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        mount = _unescape(fields[4])
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= best_len:
            best_len = len(mount)
            best = {"fs_type": tail[0], "mount": mount, "device": tail[1]}
    return best


def facts(path: str | Path) -> dict[str, Any]:
    """Where the data folder lives: path, file system, mount, free and total bytes."""
    info = {"data_folder": os.path.abspath(path), **mount_of(path)}
    probe = Path(existing(path))
    usage = shutil.disk_usage(probe)
    stat = os.statvfs(probe)
    info.update({"free_bytes": usage.free, "total_bytes": usage.total,
                 "block_size": stat.f_bsize, "fragment_size": stat.f_frsize})
    if info["fs_type"] == "lustre":
        from dliobench.storage.lustre import get_stripe

        info["lustre_stripe"] = get_stripe(probe)
    return info
