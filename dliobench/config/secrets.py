"""Credentials given as configuration keys (``key(..., secret=True)``) never leave the
process: the resolved configuration and the command line are redacted wherever they are
shown or written (result.json, show-config, provenance), and messages hide their values."""

from __future__ import annotations

import copy
from typing import Any

from dliobench.config.keys import REDACTED

__all__ = ["REDACTED", "is_secret", "redact_argv", "redact_config", "secret_keys"]


def secret_keys() -> dict[str, tuple[str, ...]]:
    """Each secret key with its aliases."""
    from dliobench.config.load import ALIASES, FIELDS

    out: dict[str, tuple[str, ...]] = {}
    for name, f in FIELDS.items():
        if f.metadata["secret"]:
            out[name] = tuple(a for a, canonical in ALIASES.items() if canonical == name)
    return out


def redact_config(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy of a configuration document (``config_dict``) with every secret value set."""
    out = copy.deepcopy(doc)
    for name in secret_keys():
        section, field_name = name.split(".", 1)
        if out.get(section, {}).get(field_name):
            out[section][field_name] = REDACTED
    return out


def is_secret(key: str) -> bool:
    """Whether an override's key (its name or an alias, Hydra's ``+``/``workload.`` prefixes
    allowed) names a credential."""
    bare = key.strip().lstrip("+").removeprefix("workload.")
    return any(bare == name or bare in aliases for name, aliases in secret_keys().items())


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with the values of secret overrides (``KEY=VALUE``) replaced."""
    out = []
    for item in argv:
        name, sep, _ = item.partition("=")
        out.append(f"{name}={REDACTED}" if sep and is_secret(name) else item)
    return out
