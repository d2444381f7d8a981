"""The facts a result records of the place a run ran in, gathered once where it runs: the
host, the storage (its backend's facts), dliobench's version and commit, the provenance.

The result documents (``results.assemble``, ``results.metadata``) take them as an argument,
so assembling a result (``dliobench recover`` too, from the journal header) reads no host and
builds no backend.
"""

from __future__ import annotations

from typing import Any

from dliobench.config.schema import Config
from dliobench.results import provenance, sysinfo
from dliobench.results.files import config_dict
from dliobench.storage import backend_for


def run_facts(config: Config) -> dict[str, Any]:
    """What a result records of the place it ran in, taken where and when the run starts
    (rank 0, before training): the host, the storage, dliobench's version and commit, the
    provenance. Kept in the run's journal header, so a result assembled later (``dliobench
    recover``, on another host perhaps) records the run's, not its own."""
    doc = config_dict(config)
    return {"machine": sysinfo.machine(),
            "storage": backend_for(config.dataset.data_folder, config.storage).facts(),
            "dliobench_version": sysinfo.version(), "commit": sysinfo.commit(),
            "provenance": provenance.collect(doc)}
