"""Journal records: the fixed-size row generation appends per durable file (``Manifest.append``),
with a CRC-32C of its own, so a torn or damaged row is recognised when the journals are read."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import crc32c
import numpy as np

ABSENT = -1  # size of a file (or side file) the manifest does not hold


def record_dtype(sides: int, samples: int = 0) -> np.dtype:
    """One journal record: a file's index, size and CRC, its side files', its samples' CRCs
    (when recorded), a check CRC. A size of ``ABSENT`` forgets the file (found damaged)."""
    fields: list[tuple[Any, ...]] = [("index", "<i8"), ("size", "<i8"), ("crc", "<u4")]
    if sides:
        fields += [("side_size", "<i8", (sides,)), ("side_crc", "<u4", (sides,))]
    if samples:
        fields += [("sample_crc", "<u4", (samples,))]
    return np.dtype([*fields, ("check", "<u4")])


Entry = tuple[int, int, tuple[tuple[int, int], ...]] | tuple[
    int, int, tuple[tuple[int, int], ...], tuple[int, ...]]  # size, crc, sides[, sample CRCs]


def records(entries: Mapping[int, Entry], sides: int, samples: int = 0) -> np.ndarray:
    """Journal records of {file index: (size, crc, ((side size, side crc), ...)[, sample
    CRCs])}."""
    out = np.zeros(len(entries), record_dtype(sides, samples))
    for row, (index, entry) in enumerate(sorted(entries.items())):
        size, crc, side = entry[0], entry[1], entry[2]
        out[row]["index"], out[row]["size"], out[row]["crc"] = index, size, crc
        if sides:
            out[row]["side_size"] = [s for s, _ in side] or ABSENT
            out[row]["side_crc"] = [c for _, c in side] or 0
        if samples and len(entry) > 3:
            out[row]["sample_crc"] = entry[3] or 0
    return out


def forget(indices: Iterable[int], sides: int, samples: int = 0) -> np.ndarray:
    """Journal records that forget these files (found damaged: they are written again)."""
    return records({i: (ABSENT, 0, ()) for i in indices}, sides, samples)


def checks(recs: np.ndarray) -> np.ndarray:
    """Each record's CRC-32C over all its bytes but the check itself."""
    if not len(recs):
        return np.empty(0, np.uint32)
    raw = recs.view(np.uint8).reshape(len(recs), -1)[:, :-4]
    return np.array([crc32c.crc32c(row.tobytes()) for row in raw], dtype=np.uint32)


def with_checks(recs: np.ndarray) -> np.ndarray:
    out = recs.copy()
    out["check"] = checks(out)
    return out


