"""Which settings differ between runs, and which of them change together (one factor).

A layout comparison changes samples per file, file count and data folder at once: those keys
are one variable of the comparison, not three. Pure functions of the runs' flattened configs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

PATH_KEYS = frozenset({"dataset.data_folder", "checkpoint.checkpoint_folder"})


def flatten(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``{"a.b": value}``; lists become strings so values are hashable."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, name + "."))
        elif isinstance(value, (list, dict)):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def sections(config: dict[str, Any]) -> dict[str, Any]:
    """``{"section.key": value}`` of a result's configuration, one level deep (``accelerators``
    left out: the chosen profile's figures are in ``train`` and ``metric``), as the rules
    compare a run with upstream's file."""
    out: dict[str, Any] = {}
    for section, values in config.items():
        if section == "accelerators" or not isinstance(values, dict):
            continue
        for key, value in values.items():
            out[f"{section}.{key}"] = value
    return out


def differing_keys(settings: Sequence[dict[str, Any]]) -> list[str]:
    """Keys whose value is not the same in every run (a key missing somewhere counts)."""
    keys = sorted({k for s in settings for k in s})
    missing = object()
    return [k for k in keys if len({repr(s.get(k, missing)) for s in settings}) > 1]


def _partition(values: Sequence[Any]) -> tuple[int, ...]:
    """Runs numbered by the first run having the same value: equal for co-varying keys."""
    first: dict[str, int] = {}
    return tuple(first.setdefault(repr(v), i) for i, v in enumerate(values))


def _refines(fine: tuple[int, ...], coarse: tuple[int, ...]) -> bool:
    """True when runs equal under ``fine`` are always equal under ``coarse`` too."""
    seen: dict[int, int] = {}
    return all(seen.setdefault(f, c) == c for f, c in zip(fine, coarse, strict=True))


def factors_of(settings: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[tuple[str, ...]]:
    """Differing keys grouped by the way they split the runs (keys that change together).

    A key whose value follows from another group's (reader.file_access=shared only where
    num_files_train=1, in a layout sweep) joins that group: it is not a setting of its own.
    Paths (a data folder per run) never absorb other keys: a folder that follows from the
    other factors (one per layout and tier) is left out; one that does not is a factor.
    """
    plain = _merge(settings, [k for k in keys if k not in PATH_KEYS])
    joint = _partition([tuple(repr(s.get(f[0])) for f in plain) for s in settings])
    paths = [f for f in _merge(settings, [k for k in keys if k in PATH_KEYS])
             if not (plain and _refines(joint, _partition([s.get(f[0]) for s in settings])))]
    return plain + paths


def _merge(settings: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[tuple[str, ...]]:
    """Group ``keys`` by partition; a partition implied by a finer one joins it."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for key in keys:
        groups.setdefault(_partition([s.get(key) for s in settings]), []).append(key)
    merged: dict[tuple[int, ...], list[str]] = {}
    for part, members in sorted(groups.items(), key=lambda g: -len(set(g[0]))):
        owner = next((p for p in merged if _refines(p, part)), None)
        merged.setdefault(owner or part, []).extend(members)
    return [tuple(g) for g in merged.values()]
