"""The workload and sweep files dliobench ships, found by name from any folder.

A name (``unet3d``) is looked up in ``./workloads`` (or ``./configs``) first, then in the
source checkout dliobench runs from, then where a wheel installs them
(``<prefix>/share/dliobench/...``). A path is taken as given. Where a name could mean two
things, the one chosen is said: a folder of the working directory named like a shipped
workload (a data folder ``./unet3d``) is not a workload, so the shipped one is taken; a file
of that name is taken; a copy in ``./workloads`` is taken before the shipped one.
"""

from __future__ import annotations

import logging
import sys
import sysconfig
from pathlib import Path

from dliobench import CHECKOUT, from_checkout
from dliobench.base.errors import ConfigError

__all__ = ["CHECKOUT", "find", "folders", "from_checkout", "names", "workload_path"]
log = logging.getLogger(__name__)


def folders(kind: str) -> list[Path]:
    """Where shipped files of ``kind`` ("workloads" or "configs") may be, in search order."""
    data = Path(sysconfig.get_paths()["data"])
    return [Path(kind), CHECKOUT / kind, data / "share" / "dliobench" / kind,
            Path(sys.prefix) / "share" / "dliobench" / kind]


def find(name: str, kind: str, local: bool = True) -> Path | None:
    """The shipped file ``name`` (without .yaml) of ``kind``, or None; ``local=False`` skips
    the current folder's copy (the reference ``dliobench check`` compares runs against)."""
    for folder in folders(kind)[0 if local else 1:]:
        candidate = folder / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    return None


def names(kind: str) -> list[str]:
    """The names of every shipped file of ``kind`` that can be found."""
    found = {p.stem for folder in folders(kind) if folder.is_dir()
             for p in folder.glob("*.yaml")}
    return sorted(found)


def workload_path(name: str) -> Path:
    """A workload given as a path, or as the name of a shipped workload (which one, said
    where the name could mean another)."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        return path
    found = find(name, "workloads") if len(path.parts) == 1 else None
    if path.is_dir() and found is not None:
        log.warning("./%s is a folder, not a workload file: the workload %s is %s", name,
                    name, found)
        return found
    if path.exists():
        if found is not None:
            log.warning("the workload %s is the file ./%s, not %s (give %s to use that one)",
                        name, name, found, found)
        return path
    shipped = find(name, "workloads", local=False)
    if found is not None and shipped is not None and found.resolve() != shipped.resolve():
        log.info("the workload %s is this folder's copy %s, not the shipped %s", name, found,
                 shipped)
    if found is None:
        known = ", ".join(names("workloads")) or "none found"
        raise ConfigError(f"no workload named '{name}': give a path to a YAML file or one of "
                          f"the shipped names ({known})")
    return found

