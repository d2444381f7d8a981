"""Byte counts in words people read: decimal units, as storage vendors and MLPerf quote them."""

from __future__ import annotations


def size_text(nbytes: float) -> str:
    """``1.23 GB``, ``45.6 MB``, ``7.8 kB`` or ``12 bytes``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:,.2f} {unit}" if scale >= 1e9 else \
                f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes:,.0f} bytes"
