"""Lustre striping of the dataset and checkpoint folders (``storage.lustre.*``), via ``lfs``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from dliobench.base.errors import ConfigError, DatasetError
from dliobench.config.schema import StorageConfig


def wants_striping(cfg: StorageConfig) -> bool:
    """True when the configuration asks for a stripe layout."""
    return bool(cfg.lustre_stripe_count or cfg.lustre_stripe_size)


def set_stripe(folder: Path, cfg: StorageConfig) -> None:
    """Apply ``lfs setstripe`` to a folder, so files created in it inherit the layout."""
    lfs = shutil.which("lfs")
    if lfs is None:
        raise ConfigError("storage.lustre.stripe_count/stripe_size need the Lustre `lfs` "
                          "command, which is not installed here; remove the keys or run on a "
                          "Lustre client")
    folder.mkdir(parents=True, exist_ok=True)
    args = [lfs, "setstripe"]
    if cfg.lustre_stripe_count:
        args += ["-c", str(cfg.lustre_stripe_count)]
    if cfg.lustre_stripe_size:
        args += ["-S", str(cfg.lustre_stripe_size)]
    done = subprocess.run([*args, str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        raise DatasetError(f"`{' '.join(args)} {folder}` failed: {done.stderr.strip()}; is "
                           f"{folder} on Lustre?")


def get_stripe(folder: Path) -> str | None:
    """``lfs getstripe -d`` of a folder, when lfs exists (for the result file)."""
    lfs = shutil.which("lfs")
    if lfs is None or not folder.exists():
        return None
    done = subprocess.run([lfs, "getstripe", "-d", str(folder)], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None
