"""The engines that build and search an index, by ``vectordb.engine``: ``diskann`` (embedded
DiskANN, ``engines/diskann.py``); ``milvus`` (a server: issue 53) plugs in beside it as
another ``Engine`` in ``ENGINES``."""

from __future__ import annotations

from dliobench.base.errors import ConfigError
from dliobench.run.vectordb.engines.base import Engine


def engine_for(name: str) -> Engine:
    """The engine ``vectordb.engine`` names (one sentence for one not built yet)."""
    if name == "diskann":
        from dliobench.run.vectordb.engines.diskann import DiskANN

        return DiskANN()
    raise ConfigError(f"vectordb.engine {name} (a server at --host/--port) is not built yet; "
                      "leave --host out to run the embedded diskann engine")
