"""Convert raw YAML values to the kind a configuration key declares, or say why not."""

from __future__ import annotations

import math
import re
from typing import Any

from dliobench.base.errors import ConfigError
from dliobench.config.schema import PARQUET_DTYPES, ParquetColumn

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE_RE = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _fail(name: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"{name}: {value!r} is not allowed; expected {allowed}")


def to_int(name: str, value: Any) -> int:
    """An integer; integral floats (16.0) and scientific notation (1e8) are accepted."""
    if isinstance(value, bool):
        raise _fail(name, value, "an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+(\.\d*)?[eE]\+?\d{1,2}\s*", value):
        number = float(value)  # 1e8, as people write file counts (YAML reads it as text)
        if number.is_integer():
            return int(number)
    raise _fail(name, value, "an integer")


def to_size(name: str, value: Any) -> int:
    """A byte count: an integer, a float (rounded), or a string such as '64KiB' or '1.5 MB'."""
    if isinstance(value, bool):
        raise _fail(name, value, "a byte count such as 65536, 146600628.0 or '64KiB'")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return round(value)
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match and match.group(2).lower() in _SIZE_UNITS:
            number = float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]
            if math.isfinite(number):  # '1e400' is not a size
                return round(number)
    raise _fail(name, value, "a byte count such as 65536, 146600628.0 or '64KiB'")


def is_number(text: str) -> bool:
    """Whether ``text`` reads as a finite number."""
    return _is_float(text) and math.isfinite(float(text))


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def to_float(name: str, value: Any) -> float:
    """A finite number."""
    if isinstance(value, bool):
        raise _fail(name, value, "a number")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and _is_float(value) and math.isfinite(float(value)):
        return float(value)
    raise _fail(name, value, "a number")


def to_bool(name: str, value: Any) -> bool:
    """true/false (also yes/no, on/off, 1/0)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _fail(name, value, "true or false")


def to_str(name: str, value: Any) -> str:
    """A string (numbers are accepted and kept as written); never one with a NUL byte."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        text = str(value)
        if "\0" in text:
            raise _fail(name, value, "text without NUL bytes")
        return text
    if value is None:
        return ""
    raise _fail(name, value, "a string")


def to_name(name: str, value: Any) -> str:
    """Part of a file name: a string without '/' (it would make folders)."""
    text = to_str(name, value)
    if "/" in text or text in (".", ".."):
        raise _fail(name, value, "part of a file name, without '/'")
    return text


def to_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """One of a fixed set of names, case-insensitive."""
    text = str(value).strip().lower() if isinstance(value, (str, int, float)) else None
    if text not in choices:
        raise _fail(name, value, "one of " + ", ".join(choices))
    return text


def to_shuffle(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """DLIO's shuffle modes off/seed/random; true means seed and false means off."""
    if isinstance(value, bool):
        return "seed" if value else "off"
    return to_choice(name, value, choices)


def to_seconds(name: str, value: Any) -> tuple[float, float | None]:
    """A duration in seconds, or a mapping {mean, stdev} (also DLIO's {type: normal, ...}).

    Returns (mean, stdev or None when not given).
    """
    if not isinstance(value, dict):
        return to_float(name, value), None
    extra = set(value) - {"mean", "stdev", "std", "type"}
    kind = str(value.get("type", "normal")).lower()
    if extra or kind not in ("normal", "constant") or "mean" not in value:
        raise _fail(name, value, "seconds, or a mapping {mean: S, stdev: S} (normal distribution)")
    stdev = value.get("stdev", value.get("std", 0.0))
    return to_float(name + ".mean", value["mean"]), to_float(name + ".stdev", stdev)


def to_columns(name: str, value: Any) -> tuple[ParquetColumn, ...]:
    """A list of parquet columns, each a mapping {name, dtype, size (1), read (true)}."""
    if value in (None, "", []):
        return ()
    if not isinstance(value, (list, tuple)):
        raise _fail(name, value, "a list of {name, dtype, size, read} mappings")
    out = []
    for i, item in enumerate(value):
        where = f"{name}[{i}]"
        if isinstance(item, ParquetColumn):
            out.append(item)
            continue
        if not isinstance(item, dict) or "name" not in item or set(item) - {
                "name", "dtype", "size", "read"}:
            raise _fail(where, item, "a mapping {name, dtype, size, read}")
        dtype = to_choice(where + ".dtype", item.get("dtype", "float32"), PARQUET_DTYPES)
        size = to_int(where + ".size", item.get("size", 1))
        if size < 1:
            raise _fail(where + ".size", size, "at least 1")
        out.append(ParquetColumn(to_name(where + ".name", item["name"]), dtype, size,
                                 to_bool(where + ".read", item.get("read", True))))
    if len({c.name for c in out}) != len(out):
        raise _fail(name, value, "columns with different names")
    return tuple(out)
