"""Loaders by name (``reader.data_loader``): the registry owns the names.

Each loader module exposes ``build(plan, reader) -> Loader``; a new loader is one module plus
one name in ``dliobench.config.names`` plus
one line in ``REGISTRY``, and the configuration's choices, ``dliobench keys`` and the loader
contract suite all read their list from it. Modules load on first use (their extras may be
missing).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dliobench.base.errors import ConfigError
from dliobench.config.names import LOADER_NAMES, check_registry
from dliobench.loaders.base import Batch, Loader, SampleReader
from dliobench.storage import timed

if TYPE_CHECKING:
    from dliobench.dataset.plan import Plan

REGISTRY: dict[str, str] = {
    "native": "dliobench.loaders.native",
    "pytorch": "dliobench.loaders.pytorch",
    "dali": "dliobench.loaders.dali",
    "tensorflow": "dliobench.loaders.tfdata",
}
LOADERS: tuple[str, ...] = tuple(REGISTRY)
check_registry("loader", LOADER_NAMES, REGISTRY)


def sample_reader(plan: Plan) -> SampleReader:
    """The reader every loader reads and counts through, for the plan's files."""
    dataset = plan.config.dataset
    return SampleReader(plan.fmt, timed(plan.backend), plan.keys, plan.sizes,
                        dataset.num_samples_per_file, dataset.record_length_bytes_resize,
                        plan.config.reader.odirect, plan.sample_crcs,
                        decode=plan.config.reader.decode)


def make_loader(plan: Plan) -> Loader:
    """The loader the plan's configuration names, reading the plan's files on this rank."""
    name = plan.config.reader.data_loader
    if name not in REGISTRY:
        raise ConfigError(f"reader.data_loader={name} is unknown; use {', '.join(REGISTRY)}")
    loader: Loader = importlib.import_module(REGISTRY[name]).build(plan, sample_reader(plan))
    return loader


__all__ = ["LOADERS", "REGISTRY", "Batch", "Loader", "SampleReader", "make_loader",
           "sample_reader"]
