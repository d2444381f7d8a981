"""``dliobench vectordb datagen``: the vectors, the index, the queries and their exact ground
truth, built into a temporary folder beside the index folder and renamed into place with
the manifest written last, so an index folder is whole or absent: a build that fails (a full
disk, DiskANN's error, SIGKILL) leaves at most a ``.building-*`` folder, never an index that
looks whole. An index that exists is kept (runs reuse it) unless ``force``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dliobench.base.errors import ConfigError, DlioBenchError, InputError
from dliobench.config.vectordb_keys import VectorDBConfig
from dliobench.run.vectordb import inputs, manifest, truth, vectors
from dliobench.run.vectordb.engines import engine_for
from dliobench.storage.location import is_url

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Built:
    """What datagen did: the index folder, its manifest, and whether it was built now."""

    folder: Path
    doc: dict[str, Any]
    built: bool


def refuse_url(cfg: VectorDBConfig) -> None:
    """An object store is refused: DiskANN reads its index with POSIX calls."""
    if is_url(cfg.index_dir):
        raise ConfigError(f"vectordb.index_dir {cfg.index_dir} is an object store, and the "
                          "diskann engine reads its index with POSIX reads only; give a folder "
                          "on the storage under test")


def draw_for(cfg: VectorDBConfig) -> vectors.Draw:
    """The vectors ``cfg`` asks for (the count of a user's .npy is its rows)."""
    count = manifest.vector_count(cfg)
    if cfg.distribution == "npy":
        if not cfg.vectors_file:
            raise ConfigError("vectordb.distribution npy needs vectordb.vectors_file (a .npy "
                              "of N x dimension floats)")
        count = min(count, len(vectors.user_vectors(cfg.vectors_file, cfg.dimension,
                                                    cfg.vector_column)))
    return vectors.Draw(cfg.distribution, count, cfg.dimension, cfg.seed, cfg.clusters,
                        cfg.spread, cfg.vectors_file, cfg.vector_column, cfg.queries_file,
                        manifest.raw_vectors(cfg))


def _written_bytes() -> int:
    """This process's bytes sent to the block layer (/proc/self/io write_bytes; 0 unknown)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def _build_into(tmp: Path, cfg: VectorDBConfig, draw: vectors.Draw) -> dict[str, Any]:
    """Everything of the index in ``tmp``, the manifest last; returns the manifest."""
    engine = engine_for(cfg.engine)
    if cfg.index_type not in engine.index_types:
        raise ConfigError(f"the {engine.name} engine builds {', '.join(engine.index_types)}, "
                          f"not vectordb.index_type {cfg.index_type}")
    started, device0 = time.perf_counter(), _written_bytes()
    vectors.write_file(tmp / manifest.VECTORS, draw)
    vectors_s = time.perf_counter() - started
    params = engine.build(tmp / manifest.VECTORS, draw.count, tmp, cfg, tmp / manifest.BUILD_LOG)
    build_s = time.perf_counter() - started - vectors_s
    queries = vectors.queries(draw, cfg.num_query_vectors)
    base = vectors.read_file(tmp / manifest.VECTORS)
    step = max(1024, truth.DISTANCES // max(1, len(queries)))  # a bounded distance matrix
    exact = truth.exact(queries, (np.asarray(base[i:i + step]) for i in
                                  range(0, draw.count, step)), cfg.k)
    given = None if not cfg.truth_file else inputs.check_given(
        cfg.truth_file, exact.ids, exact.distances, queries, base, cfg.k)
    truth_s = time.perf_counter() - started - vectors_s - build_s
    np.save(tmp / manifest.QUERIES, queries)
    np.save(tmp / manifest.TRUTH_IDS, exact.ids)
    np.save(tmp / manifest.TRUTH_D, exact.distances)
    files = manifest.files_of(tmp)
    doc = {"format": manifest.FORMAT, "version": manifest.VERSION, "engine": engine.name,
           # what the engine really built (a server may accept a type it does not build)
           "index_type": params.get("built_index_type", cfg.index_type),
           "index_type_asked": cfg.index_type, "metric_type": cfg.metric_type,
           "vectors": manifest.draw_of(cfg) | {"count": draw.count},
           "queries": {"count": len(queries), "seed": cfg.seed}, "k": cfg.k,
           "num_shards": cfg.num_shards, "params": params, "files": files,
           "truth": {"ids": manifest.TRUTH_IDS, "distances": manifest.TRUTH_D,
                     "sha256": manifest.sha256(tmp / manifest.TRUTH_IDS),
                     "method": "exact brute force, chunked (run/vectordb/truth.py)",
                     "given": given},
           "build": {"vectors_s": round(vectors_s, 3), "index_s": round(build_s, 3),
                     "truth_s": round(truth_s, 3), "bytes": sum(files.values()),
                     "device_write_bytes": _written_bytes() - device0},
           "deviations": list(engine.deviations),
           "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    (tmp / manifest.NAME).write_text(json.dumps(doc, indent=1))
    return doc


def _failed(exc: BaseException, tmp: Path) -> DlioBenchError:
    full = (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "No space left" in str(exc)
    if full:
        return DlioBenchError(f"the storage under {tmp.parent} filled up while building the "
                              "index; nothing was left behind: free space there (`dliobench "
                              "vectordb datasize` says how much an index takes) or give "
                              "another vectordb.index_dir")
    if isinstance(exc, DlioBenchError):
        return exc
    return DlioBenchError(f"building the index in {tmp.parent} failed ({exc}); nothing was "
                          f"left behind (the end of its log is shown above)")


def datagen(cfg: VectorDBConfig) -> Built:
    """Build the index ``cfg`` names, unless it is there and ``force`` is not asked."""
    refuse_url(cfg)
    engine_for(cfg.engine).ready(cfg)  # refused before any work: a server not there
    folder = manifest.folder_of(cfg)
    if (folder / manifest.NAME).exists() and not cfg.force:
        return Built(folder, manifest.load(cfg).doc, False)
    draw = draw_for(cfg)
    folder.parent.mkdir(parents=True, exist_ok=True)
    _drop_stale(folder)
    tmp = folder.parent / f".building-{folder.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        doc = _build_into(tmp, cfg, draw)
        _replace(tmp, folder)
    except BaseException as exc:
        keep_log = tmp / manifest.BUILD_LOG
        text = keep_log.read_text(errors="replace")[-4000:] if keep_log.exists() else ""
        shutil.rmtree(tmp, ignore_errors=True)
        if text:
            log.warning("the failed build's log (its end):\n%s", text)
        if isinstance(exc, (KeyboardInterrupt, InputError, ConfigError)):
            raise
        raise _failed(exc, tmp) from None
    return Built(folder, doc, True)


def _drop_stale(folder: Path) -> None:
    """Remove what killed builds of this index left (their process is gone)."""
    for left in [*folder.parent.glob(f".building-{folder.name}-*"),
                 *folder.parent.glob(f".old-{folder.name}-*")]:
        pid = left.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(left, ignore_errors=True)


def _replace(tmp: Path, folder: Path) -> None:
    """Move the built folder into place (an old index aside first, then removed)."""
    old = folder.parent / f".old-{folder.name}-{os.getpid()}"
    if folder.exists():
        os.rename(folder, old)
    os.rename(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)
