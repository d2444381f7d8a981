"""DLIO's Hydra-style command line: ``workload=NAME`` picks the workload, ``++workload.KEY=V``
(also ``+workload.KEY=V`` and ``workload.KEY=V``) overrides a key, as DLIO users and the
command lines mlpstorage generates write them.

A DLIO workload name (``unet3d_h100``, ``resnet50_a100``, ``bert_v100``, ``unet3d_b200``) is
our workload of the part before the last ``_`` with the accelerator profile after it; a name
we ship as it is (``unet3d``, ``default``) is taken as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dliobench.base.errors import ConfigError
from dliobench.config import shipped, yamlfile

_WORKLOAD = re.compile(r"^\+{0,2}workload=(.*)$")
HYDRA_OWN = ("hydra.", "+hydra.", "++hydra.")  # Hydra's own settings (run dir, logging)


@dataclass(frozen=True)
class CommandLine:
    """The workload file, the accelerator its DLIO name implies, and the overrides."""

    path: Path
    accelerator: str | None
    overrides: list[str]
    ignored: list[str] = field(default_factory=list)  # Hydra's own settings, not ours


def split(items: list[str], default: str, config_dir: str | None = None) -> CommandLine:
    """The workload (a first item without '=', or ``workload=NAME`` anywhere) and the
    overrides; ``config_dir``: DLIO's ``--config-dir`` (its ``workload/NAME.yaml`` first)."""
    name: str | None = None
    rest: list[str] = []
    ignored: list[str] = []
    for position, item in enumerate(items):
        match = _WORKLOAD.match(item)
        if match:
            if name is not None:
                raise ConfigError(f"two workloads on the command line ('{name}' and "
                                  f"'{match.group(1)}'); give one")
            name = match.group(1).strip()
            if not name:
                raise ConfigError("workload= is empty; give a workload name (unet3d, "
                                  "unet3d_h100, ...) or a YAML file")
        elif position == 0 and "=" not in item:
            name = item
        elif item.startswith(HYDRA_OWN):
            ignored.append(item)
        else:
            rest.append(item)
    path, accelerator = resolve(name or default, config_dir)
    return CommandLine(path, accelerator, rest, ignored)


def resolve(name: str, config_dir: str | None = None) -> tuple[Path, str | None]:
    """A workload file and, for a DLIO name (``unet3d_h100``), its accelerator profile."""
    if config_dir:
        candidate = Path(config_dir) / "workload" / f"{name}.yaml"
        if candidate.is_file():
            return candidate, None
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists() or shipped.find(name, "workloads"):
        return shipped.workload_path(name), None
    base, sep, accelerator = name.rpartition("_")
    found = shipped.find(base, "workloads") if sep else None
    if found is None:
        return shipped.workload_path(name), None  # its error names the shipped workloads
    have = profiles(found)
    if accelerator not in have:
        raise ConfigError(f"workload '{name}': our {base} workload has no '{accelerator}' "
                          f"accelerator profile (it has: {', '.join(have) or 'none'}); use "
                          f"workload={base} with train.accelerator=NAME")
    return found, accelerator


def profiles(path: Path) -> list[str]:
    """The accelerator profiles a workload file declares."""
    doc = yamlfile.read(path, "workload file")
    section = doc.get("accelerators") if isinstance(doc, dict) else None
    return sorted(str(k) for k in section) if isinstance(section, dict) else []
