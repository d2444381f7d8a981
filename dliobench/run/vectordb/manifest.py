"""The index manifest, ``manifest.json`` in the index folder, written last when an index is
built: what the vectors are (distribution, seed, clusters, spread), the engine's parameters,
every file with its size, the queries and their ground truth (with its SHA-256). Runs read
it, so the rules' five runs reuse one index; ``load`` refuses, in one sentence each, a
missing or damaged index, files that differ from what it lists, a ground truth that does not
match, and an index of other vectors than the run asks for.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dliobench.base.errors import InputError
from dliobench.config.vectordb_keys import VectorDBConfig
from dliobench.run.vectordb import truth as truth_mod
from dliobench.run.vectordb import vectors

NAME = "manifest.json"
FORMAT = "dliobench-vectordb-index"
VERSION = 1
VECTORS, QUERIES, TRUTH_IDS, TRUTH_D = "vectors.bin", "queries.npy", "truth_ids.npy", \
    "truth_distances.npy"
BUILD_LOG = "build.log"
REBUILD = "rebuild it with `dliobench vectordb datagen --force`"


def vector_count(cfg: VectorDBConfig) -> int:
    """Vectors the configuration asks for (num_vectors x scale, at least one)."""
    return max(1, round(cfg.num_vectors * cfg.scale))


def collection(cfg: VectorDBConfig) -> str:
    """The index folder's name: as given, else from the vectors' shape, draw and engine."""
    if cfg.collection:
        return cfg.collection
    return (f"dliobench_{vector_count(cfg)}_{cfg.dimension}dim_{cfg.distribution}_"
            f"s{cfg.seed}_{cfg.engine}")


def folder_of(cfg: VectorDBConfig) -> Path:
    """Where the index of ``cfg`` lives."""
    return Path(cfg.index_dir) / collection(cfg)


def sha256(path: Path) -> str:
    """The file's SHA-256, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_of(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` (but the manifest and the log) with its size."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in (NAME, BUILD_LOG)}


def draw_of(cfg: VectorDBConfig) -> dict[str, Any]:
    """The vectors the configuration asks for, as the manifest records them."""
    return {"count": vector_count(cfg), "dimension": cfg.dimension,
            "distribution": cfg.distribution, "seed": cfg.seed,
            "clusters": cfg.clusters if cfg.distribution == "clustered" else None,
            "spread": cfg.spread if cfg.distribution in ("clustered", "npy") else None,
            "source": cfg.vectors_file if cfg.distribution == "npy" else None,
            "queries_source": cfg.queries_file or None,
            "raw": raw_vectors(cfg) or None}


def raw_vectors(cfg: VectorDBConfig) -> bool:
    """The user's vectors are indexed as they are (metric l2), not normalized (cosine)."""
    return cfg.distribution == "npy" and cfg.metric_type == "l2"


@dataclass(frozen=True)
class Index:
    """An index folder whose manifest and files were checked."""

    folder: Path
    doc: dict[str, Any]
    queries: vectors.Vectors
    truth: truth_mod.Truth


def _read(folder: Path) -> dict[str, Any]:
    path = folder / NAME
    if not path.exists():
        raise InputError(f"there is no index in {folder} (no {NAME}); build it with "
                         "`dliobench vectordb datagen` and the same keys")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"the index manifest {path} cannot be read ({exc}); {REBUILD}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"{path} is not a dliobench index manifest; {REBUILD}")
    return doc


def _differences(doc: dict[str, Any], cfg: VectorDBConfig) -> list[str]:
    wanted = {**draw_of(cfg), "engine": cfg.engine, "queries": cfg.num_query_vectors}
    have = {**doc["vectors"], "engine": doc["engine"], "queries": doc["queries"]["count"]}
    if cfg.distribution == "npy":  # the file's rows, when fewer than asked
        wanted["count"] = min(wanted["count"], have["count"])
    out = [f"{k} {have.get(k)!r} (the run asks {v!r})" for k, v in wanted.items()
           if have.get(k) != v]
    if cfg.k > doc["k"]:
        out.append(f"ground truth for k={doc['k']} (the run asks k={cfg.k})")
    return out


def load(cfg: VectorDBConfig) -> Index:
    """The checked index the run's keys name."""
    folder = folder_of(cfg)
    doc = _read(folder)
    off = _differences(doc, cfg)
    if off:
        raise InputError(f"the index in {folder} was built for other vectors: "
                         + ", ".join(off) + f"; run with its keys or {REBUILD}")
    have = files_of(folder)
    for name, size in doc["files"].items():
        if have.get(name) != size:
            said = "is missing" if name not in have else f"has {have[name]:,} bytes, not {size:,}"
            raise InputError(f"the index in {folder} is damaged: {name} {said}; {REBUILD}")
    if sha256(folder / TRUTH_IDS) != doc["truth"]["sha256"]:
        raise InputError(f"the ground truth in {folder} does not match the index it was built "
                         f"with (its SHA-256 differs from the manifest's); {REBUILD}")
    try:
        queries = np.load(folder / QUERIES, allow_pickle=False)
        found = truth_mod.Truth(np.load(folder / TRUTH_IDS, allow_pickle=False),
                                np.load(folder / TRUTH_D, allow_pickle=False))
    except (OSError, ValueError) as exc:
        raise InputError(f"the queries or ground truth in {folder} cannot be read ({exc}); "
                         f"{REBUILD}") from None
    base = vectors.read_file(folder / VECTORS)
    truth_mod.check(found, queries, base, doc["k"], str(folder))
    k = cfg.k
    return Index(folder, doc, queries,
                 truth_mod.Truth(found.ids[:, :k], found.distances[:, :k]))
