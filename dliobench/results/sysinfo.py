"""Facts about the machine and the code, for result files (the storage's: ``storage.fsinfo``)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from dliobench import __version__
from dliobench.dataset.bounds import (
    host_memory_bytes,  # a rank's memory bounds are checked against it
)

__all__ = ["commit", "host_memory_bytes", "machine", "version"]


def machine() -> dict[str, Any]:
    """This host's name, CPUs, memory and software."""
    return {
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "memory_bytes": host_memory_bytes(),
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's name as the kernel gives it (``model name`` in /proc/cpuinfo, or on some
    architectures ``Processor``/``cpu model``), else ``platform.processor()`` (DLIO's source for
    ``host_processor_name``, often empty on Linux)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("model name", "processor", "cpu model") and \
                value.strip() and not value.strip().isdigit():
            return value.strip()
    return platform.processor()


def commit() -> str | None:
    """The git commit of the dliobench source, when it runs from a checkout."""
    root = Path(__file__).resolve().parents[2]  # the checkout holding dliobench/
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uno"],
                           capture_output=True, text=True, timeout=5).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def version() -> str:
    """dliobench's version."""
    return __version__
