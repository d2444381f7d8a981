"""The engines that build and search an index, by ``vectordb.engine``: ``diskann`` (embedded
DiskANN, ``engines/diskann.py``); ``milvus`` (a Milvus server through pymilvus,
``engines/milvus.py``)."""

from __future__ import annotations

from dliobench.base.errors import ConfigError
from dliobench.run.vectordb.engines.base import Engine


def engine_for(name: str) -> Engine:
    """The engine ``vectordb.engine`` names (one sentence for one not built yet)."""
    if name == "diskann":
        from dliobench.run.vectordb.engines.diskann import DiskANN

        return DiskANN()
    if name == "milvus":
        from dliobench.run.vectordb.engines.milvus import Milvus

        return Milvus()
    raise ConfigError(f"vectordb.engine {name} is not an engine; give diskann or milvus")
