"""Data formats by name. Each module holds one format; modules load on first use."""

from __future__ import annotations

import importlib

from dliobench.config_schema import FORMATS
from dliobench.errors import ConfigError
from dliobench.formats.base import ByteRange, Format

_MODULES = {name: f"dliobench.formats.{name}" for name in FORMATS}


def get_format(name: str) -> Format:
    """The format registered under ``name``."""
    if name not in _MODULES:
        raise ConfigError(f"dataset.format: unknown format '{name}'; known: {', '.join(_MODULES)}")
    module = importlib.import_module(_MODULES[name])
    fmt: Format = module.FORMAT
    return fmt


__all__ = ["ByteRange", "Format", "get_format"]
