"""The ``milvus`` engine: a Milvus server (upstream's ``--host``/``--port``) through pymilvus,
loaded and searched as upstream's ``vdb_benchmark`` does (mlcommons/storage
``vdb_benchmark/vdbbench/load_vdb.py``@74cd0c40 ``main``): create the collection (int64 ``id``
primary key, FLOAT_VECTOR ``vector``, ``num_shards``), create the index on the empty
collection, insert in batches of ``insert_batch`` (``--batch-size``) from chunks of
``chunk_size`` (``--chunk-size``), flush, wait for the build; we then load it (milvus-lite
builds its indexes at load) and read the index back.

The index folder (``vectordb.index_dir``) keeps what the run checks recall against, as for
the diskann engine: the vectors, the queries, the exact ground truth and the manifest, which
records the server, the collection and what the server really built
(``milvus_server.built_type``). A run checks the server's collection against it (present,
dimension, rows, index type) before any query.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dliobench.base.errors import ConfigError, InputError
from dliobench.config.vectordb_keys import INDEX_TYPES, VectorDBConfig
from dliobench.run.vectordb import manifest, vectors
from dliobench.run.vectordb.engines.base import Found
from dliobench.run.vectordb.engines.milvus_server import (
    FIELD,
    address,
    answers,
    built_type,
    call,
    connect,
    index_params,
    keeps_in_memory,
    pymilvus_module,
    search_params,
    wait_built,
)

REBUILD = "rebuild it with `dliobench vectordb datagen --force` and the same keys"


class Milvus:
    """A collection on a Milvus server, built and searched through pymilvus."""

    name = "milvus"
    index_types: tuple[str, ...] = INDEX_TYPES  # what the server builds is read back
    deviations: tuple[str, ...] = (
        "the milvus engine's server reads its own storage: this client counts none of its "
        "reads (reads_per_query are the client host's)",)

    def ready(self, cfg: VectorDBConfig) -> None:
        """The server answers (one sentence when it does not), before any vector is made."""
        answers(cfg)

    def build(self, vectors_file: Path, count: int, folder: Path, cfg: VectorDBConfig,
              log: Path) -> dict[str, Any]:
        """Load the vectors of ``vectors_file`` into a new collection and build its index."""
        client, where = connect(cfg), address(cfg)
        name = manifest.collection(cfg)
        version = str(call(where, "say its version", client.get_server_version))
        if call(where, f"look up collection {name}", client.has_collection, name):
            if not cfg.force:
                raise ConfigError(f"the collection {name} already exists on the Milvus server "
                                  f"at {where}; --force drops and rebuilds it, or name "
                                  "another --collection")
            call(where, f"drop collection {name}", client.drop_collection, name)
        _create(client, where, name, cfg)
        times = _load(client, where, name, vectors_file, count, cfg, log)
        started = time.perf_counter()
        desc = wait_built(client, where, name, count, cfg.server_timeout * 10)
        call(where, f"load collection {name}", client.load_collection, name)
        times["built_and_loaded_s"] = round(time.perf_counter() - started, 3)
        built = built_type(version, str(desc.get("index_type", "")))
        shards = call(where, "describe the collection", client.describe_collection,
                      name).get("num_shards")
        with open(log, "a") as out:
            out.write(f"described after the build: {desc}; built: {built}\n")
        return {"server": where, "server_version": version, "collection": name,
                "index_type_asked": cfg.index_type, "built_index_type": built,
                "index_params": index_params(cfg), "described_index": desc,
                "in_memory": keeps_in_memory(version, built), "metric": cfg.metric_type,
                "num_shards_asked": cfg.num_shards, "num_shards_server": shards,
                "insert_batch": cfg.insert_batch, "chunk_size": cfg.chunk_size, **times,
                "binding": _version()}

    def open(self, folder: Path, cfg: VectorDBConfig, log: Path) -> _Searcher:
        """Check the server's collection against the index's manifest, load it, search it."""
        doc = json.loads((folder / manifest.NAME).read_text())
        built, name = doc["params"], doc["params"]["collection"]
        client, where = connect(cfg), address(cfg)
        _check(client, where, name, doc, folder)
        call(where, f"load collection {name}", client.load_collection, name)
        kind = built["built_index_type"]
        with open(log, "a") as out:
            out.write(f"searching {name} at {where} ({built['server_version']}, {kind}) with "
                      f"{search_params(kind, cfg)}\n")
        return _Searcher(client, where, name,
                         {"metric_type": cfg.metric_type.upper(),
                          "params": search_params(kind, cfg)})


def _check(client: Any, where: str, name: str, doc: dict[str, Any], folder: Path) -> None:
    """The server's collection is the one the manifest describes (present, dimension, rows,
    index type): one sentence saying what differs."""
    if not call(where, f"look up collection {name}", client.has_collection, name):
        raise InputError(f"the Milvus server at {where} has no collection {name}, which the "
                         f"index in {folder} was built into; {REBUILD}")
    desc = call(where, "describe the collection", client.describe_collection, name)
    dim = next((f.get("params", {}).get("dim") for f in desc.get("fields", [])
                if f.get("name") == FIELD), None)
    want = doc["vectors"]["dimension"]
    if dim is None or int(dim) != want:
        raise InputError(f"the collection {name} on the Milvus server at {where} holds "
                         f"vectors of dimension {dim}, the index in {folder} {want}; {REBUILD}")
    stats = call(where, "count the collection", client.get_collection_stats, name)
    rows = int(stats.get("row_count", -1))
    if rows != doc["vectors"]["count"]:
        raise InputError(f"the collection {name} on the Milvus server at {where} holds "
                         f"{rows:,} vectors, the index in {folder} "
                         f"{doc['vectors']['count']:,}; {REBUILD}")
    now = call(where, "describe the index", client.describe_index, name, FIELD) or {}
    was = doc["params"]["described_index"].get("index_type")
    if now.get("index_type") != was:
        raise InputError(f"the collection {name} on the Milvus server at {where} has a "
                         f"{now.get('index_type')} index, the index in {folder} was built "
                         f"{was}; {REBUILD}")


def _create(client: Any, where: str, name: str, cfg: VectorDBConfig) -> None:
    """The collection (upstream's schema) and its index, created on the empty collection."""
    pm = pymilvus_module()
    schema = pm.MilvusClient.create_schema(auto_id=False, description="dliobench vectordb")
    schema.add_field("id", pm.DataType.INT64, is_primary=True)
    schema.add_field(FIELD, pm.DataType.FLOAT_VECTOR, dim=cfg.dimension)
    call(where, f"create collection {name}", client.create_collection, name,
            schema=schema, shards_num=cfg.num_shards)
    index = client.prepare_index_params()
    index.add_index(field_name=FIELD, index_type=cfg.index_type.upper(),
                    metric_type=cfg.metric_type.upper(), params=index_params(cfg))
    call(where, f"create a {cfg.index_type.upper()} index", client.create_index, name,
            index)


def _load(client: Any, where: str, name: str, vectors_file: Path, count: int,
          cfg: VectorDBConfig, log: Path) -> dict[str, float]:
    """Insert the vectors (ids 0..count-1, as the vector file orders them), then flush."""
    base = vectors.read_file(vectors_file)
    started = time.perf_counter()
    with open(log, "a") as out:
        for at in range(0, count, cfg.chunk_size):
            chunk = np.asarray(base[at:at + cfg.chunk_size], dtype=np.float32)
            for i in range(0, len(chunk), cfg.insert_batch):
                rows = [{"id": at + i + j, FIELD: v}
                        for j, v in enumerate(chunk[i:i + cfg.insert_batch])]
                call(where, f"insert into {name}", client.insert, name, rows)
            out.write(f"inserted {min(at + cfg.chunk_size, count):,} of {count:,} vectors\n")
        insert_s = time.perf_counter() - started
        call(where, f"flush {name}", client.flush, name)
        out.write(f"flushed after {time.perf_counter() - started:.2f} s\n")
    return {"insert_s": round(insert_s, 3),
            "flush_s": round(time.perf_counter() - started - insert_s, 3)}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"pymilvus {version('pymilvus')}"
    except PackageNotFoundError:
        return "pymilvus (version unknown)"


class _Searcher:
    """One pymilvus client (its gRPC channel is shared by the rank's client threads); a
    search call sends the whole batch, asks only ids back."""

    def __init__(self, client: Any, where: str, name: str, params: dict[str, Any]) -> None:
        self.client, self.where, self.name, self.params = client, where, name, params

    def search(self, queries: npt.NDArray[np.float32], k: int) -> Found:
        got = call(self.where, f"search {self.name}", self.client.search, self.name,
                      data=queries, limit=k, search_params=self.params, output_fields=["id"])
        ids = np.full((len(queries), k), -1, dtype=np.int64)
        for row, hits in enumerate(got):
            found = [int(h["id"]) for h in hits][:k]
            ids[row, :len(found)] = found
        return Found(ids, None)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None
