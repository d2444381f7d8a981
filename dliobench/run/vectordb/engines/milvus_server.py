"""Talking to a Milvus server for the ``milvus`` engine: connecting (one sentence when no server
answers), the index and search parameters of each index type, waiting for the build, and
what the server really built.

The parameters are upstream's where upstream names them (mlcommons/storage
``vdb_benchmark/vdbbench/load_vdb.py``@74cd0c40: HNSW ``M``/``efConstruction``, DISKANN
``MaxDegree``/``SearchListSize``, AISAQ ``inline_pq``/``max_degree``/``search_list_size``);
search parameters are Milvus's (``ef`` for HNSW, ``search_list`` for DISKANN and AISAQ,
``nprobe`` for IVF).

What was built: a Milvus server builds the index type it accepted, and ``describe_index``
says which. milvus-lite (PyPI milvus-lite 3.2.2, ``milvus_lite/index/factory.py``) builds
FAISS HNSW, HNSW_SQ, IVF_FLAT, IVF_SQ8 and IVF_PQ and a brute-force FLAT, all in memory; it
*accepts* DISKANN and AISAQ, and ``describe_index`` then reports them with state Finished,
but it writes no index for them and searches by a brute-force scan (seen here: no index
file in its data folder, recall@10 1.0 at ef 10). So a milvus-lite server's built type is
read from that list, never from ``describe_index`` alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from dliobench.base.errors import DlioBenchError, MissingExtraError
from dliobench.config.vectordb_keys import VectorDBConfig

T = TypeVar("T")
LITE = "milvus_lite"  # how milvus-lite's get_server_version() begins
LITE_BUILDS = ("hnsw", "hnsw_sq", "ivf_flat", "ivf_sq8", "ivf_pq", "flat")
DISK_TYPES = ("diskann", "aisaq")  # a Milvus server searches these from its local disk
AISAQ_INLINE_PQ = 16  # upstream's --inline-pq default (load_vdb.py@74cd0c40)
FIELD = "vector"  # upstream's field names: int64 "id" and FLOAT_VECTOR "vector"


def address(cfg: VectorDBConfig) -> str:
    """host:port of the server ``cfg`` names (127.0.0.1 when no host is given)."""
    return f"{cfg.host or '127.0.0.1'}:{cfg.port}"


def pymilvus_module() -> Any:
    """pymilvus, imported (one sentence when the milvus extra is not installed)."""
    try:
        import pymilvus
    except ImportError:
        raise MissingExtraError("pymilvus", "milvus") from None
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # its own tracebacks: ours say it
    return pymilvus


def _down(where: str) -> DlioBenchError:
    return DlioBenchError(f"no Milvus server answers at {where}; start one (e.g. `milvus-lite "
                          f"server --data-dir DIR --port {where.rsplit(':', 1)[-1]}`) or give "
                          "its --host and --port")


def connect(cfg: VectorDBConfig) -> Any:
    """A ``MilvusClient`` of the server ``cfg`` names (one sentence when none answers)."""
    pm = pymilvus_module()
    where = address(cfg)
    try:
        return pm.MilvusClient(uri=f"http://{where}", timeout=cfg.server_timeout)
    except Exception:  # pymilvus raises MilvusException (and grpc's) for a server not there
        raise _down(where) from None


def answers(cfg: VectorDBConfig) -> None:
    """The server answers a call (pymilvus may reuse a cached channel, so connecting alone
    does not say it); one sentence when it does not."""
    client = connect(cfg)
    try:
        client.get_server_version()
    except Exception:
        raise _down(address(cfg)) from None
    finally:
        client.close()


def call(where: str, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, a server's failure said in one sentence naming ``what``."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if isinstance(exc, DlioBenchError):
            raise
        text = str(getattr(exc, "message", "") or exc)
        if "Fail connecting" in text or "unavailable" in text.lower():
            raise DlioBenchError(f"the Milvus server at {where} stopped answering while it "
                                 f"was asked to {what}; restart it and run again") from None
        raise DlioBenchError(f"the Milvus server at {where} refused to {what}: {text}") from None


def index_params(cfg: VectorDBConfig) -> dict[str, Any]:
    """The build parameters of ``cfg.index_type`` (upstream's names, see the module)."""
    kind = cfg.index_type
    if kind == "hnsw":
        return {"M": cfg.m, "efConstruction": cfg.ef_construction}
    if kind == "diskann":
        return {"MaxDegree": cfg.max_degree, "SearchListSize": cfg.search_list_size}
    if kind == "aisaq":
        return {"inline_pq": AISAQ_INLINE_PQ, "max_degree": cfg.max_degree,
                "search_list_size": cfg.search_list_size}
    if kind in ("ivf_flat", "ivf_sq8"):
        return {"nlist": cfg.nlist}
    return {}


def search_params(built: str, cfg: VectorDBConfig) -> dict[str, Any]:
    """Milvus's search parameters for the index type the server built."""
    wide = max(cfg.search_list, cfg.k)
    if built.startswith("hnsw"):
        return {"ef": wide}
    if built in DISK_TYPES:
        return {"search_list": wide}
    if built.startswith("ivf"):
        return {"nprobe": min(cfg.search_list, cfg.nlist)}
    return {}


def built_type(server_version: str, described: str) -> str:
    """The index type the server really built (lower case), given what ``describe_index``
    said: milvus-lite scans by brute force (``flat``) for a type it does not build."""
    kind = described.lower()
    if server_version.startswith(LITE) and kind not in LITE_BUILDS:
        return "flat"
    return kind


def keeps_in_memory(server_version: str, built: str) -> bool:
    """Whether the server answers from memory (milvus-lite always; Milvus but for its disk
    indexes)."""
    return server_version.startswith(LITE) or built not in DISK_TYPES


def wait_built(client: Any, where: str, name: str, rows: int, limit_s: float) -> dict[str, Any]:
    """Poll ``describe_index`` until the server has indexed ``rows`` rows (upstream's
    ``load_vdb.py``@74cd0c40 waits the same way, through ``compact_and_watch.py``'s
    ``monitor_progress``); its last answer."""
    deadline = time.monotonic() + limit_s
    while True:
        desc: dict[str, Any] = call(where, "describe the index", client.describe_index, name,
                                    FIELD)
        done = str(desc.get("state", "")).lower() == "finished" and \
            int(desc.get("indexed_rows", rows)) >= rows and not desc.get("pending_index_rows")
        if done:
            return desc
        if time.monotonic() > deadline:
            raise DlioBenchError(f"the Milvus server at {where} had not finished the index of "
                                 f"{name} after {limit_s:.0f} s ({desc}); wait for it and run "
                                 "datagen again, or raise vectordb.server_timeout")
        time.sleep(0.2)
