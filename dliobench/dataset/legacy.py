"""Schema-1 manifests (one JSON document, ``dliobench-manifest.json``) migrated to schema 2.

The old document names files by relative path; the index is the number before the
extension (``img_0000042.npz`` -> 42). Side files were not recorded: their sizes stay
unknown, so they are checked for presence only until the file is written again.
"""

from __future__ import annotations

import json
import logging

from dliobench.dataset.manifest import (
    LEGACY_INDEX,
    LEGACY_KEY,
    Manifest,
    read_whole,
    records,
)
from dliobench.errors import DatasetError
from dliobench.formats import get_format
from dliobench.storage.backend import Backend

log = logging.getLogger(__name__)


def migrate(backend: Backend) -> Manifest | None:
    """The schema-2 manifest of a dataset with a schema-1 one (which is then removed)."""
    data = read_whole(backend, LEGACY_KEY)
    if data is None:
        return None
    path = backend.describe(LEGACY_KEY)
    try:
        doc = json.loads(bytes(data))
        params, files = dict(doc["params"]), dict(doc["files"])
        checksums = {k: int(v) for k, v in doc.get("checksums", {}).items()}
        sides = get_format(str(params["format"])).side_suffixes
        entries: dict[int, tuple[int, int, tuple[tuple[int, int], ...]]] = {}
        for rel, size in files.items():
            match = LEGACY_INDEX.search(rel)
            if match is None:
                raise ValueError(rel)
            entries[int(match.group(1))] = (int(size), checksums.get(rel, 0), ())
    except (ValueError, KeyError, TypeError, AttributeError):
        raise DatasetError(f"the manifest {path} is damaged; delete it and run "
                           "`dliobench generate` to check and complete the dataset") from None
    manifest = Manifest(backend, params, list(sides))
    manifest.compact(extra=records(entries, len(sides)))
    backend.delete(LEGACY_KEY)
    log.info("migrated the manifest %s (%d files) to %s", path, len(entries),
             backend.describe(manifest.to_json()["columns"]["size"]))
    return manifest



