"""Schema-1 manifests (one JSON document, ``dliobench-manifest.json``) migrated to schema 2.

The old document names files by relative path; the index is the number before the
extension (``img_0000042.npz`` -> 42). Side files were not recorded: their sizes stay
unknown, so they are checked for presence only until the file is written again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dliobench.base.errors import DatasetError

LEGACY_KEY = "dliobench-manifest.json"
LEGACY_INDEX = re.compile(r"_(\d+)\.[^./]+$")
Entry = tuple[int, int, tuple[tuple[int, int], ...]]


def parse(data: bytes, path: str) -> tuple[dict[str, Any], dict[int, Entry]]:
    """The generation parameters and the {file index: (size, crc, ())} entries of a schema-1
    document; ``path`` names it in the one-sentence error a damaged one gets."""
    try:
        doc = json.loads(data)
        params, files = dict(doc["params"]), dict(doc["files"])
        checksums = {k: int(v) for k, v in doc.get("checksums", {}).items()}
        entries: dict[int, Entry] = {}
        for rel, size in files.items():
            match = LEGACY_INDEX.search(rel)
            if match is None:
                raise ValueError(rel)
            entries[int(match.group(1))] = (int(size), checksums.get(rel, 0), ())
    except (ValueError, KeyError, TypeError, AttributeError):
        raise DatasetError(f"the manifest {path} is damaged; delete it and run "
                           "`dliobench generate` to check and complete the dataset") from None
    return params, entries
