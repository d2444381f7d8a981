"""The client ceiling: what this host's loader delivers per rank from memory (compute 0).

A run that waited is storage-limited only if the client could have kept up: the same format,
sample sizes, loader settings and ranks per node, read from a copy generated in ``/dev/shm``
(at most a quarter of RAM; re-read over several epochs when that holds fewer steps than
needed), give the most samples/s a rank can take in here, whatever the storage. Results are
cached in ``$XDG_CACHE_HOME/dliobench/ceiling.json`` (default ``~/.cache``), keyed by host,
dliobench version, those settings and the cores the rank may use, with the host's load when
measured: a ceiling is the client's speed under that load, so a run judges against a cached
one only when the other processes now keep about as many cores busy (``load_matches``);
otherwise it measures again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from dliobench import __version__
from dliobench.base.errors import ConfigError
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.results.hostcpu import jiffies
from dliobench.results.schema import RunResult
from dliobench.storage.atomic import write_json_atomic

# Runs the probe configuration as a whole run on this rank and returns its result (rank 0)
# or None: the session passes its own ``run`` in, so this module never imports the session
# whose verdicts it serves (a run within the run).
ProbeRunner = Callable[[Config], "RunResult | None"]

log = logging.getLogger(__name__)
COUNTED_STEPS = 10  # counted steps per rank the measurement needs at least
MEMORY_SHARE = 0.25  # of the host's memory, for the generated copy (all of a node's ranks)
LOAD_SAMPLE_S = 0.25  # how long the host's load is sampled, before measuring or reusing
LOAD_TOLERANCE = (0.5, 0.1)  # busy cores may differ by 0.5 cores or 10 % of the cores


def key_of(config: Config, world: World) -> str:
    """What the ceiling depends on: host, version, format, sizes, loader settings, ranks."""
    d, r = config.dataset, config.reader
    parts = [socket.gethostname(), __version__, d.format, d.num_samples_per_file,
             d.record_length_bytes, d.record_length_bytes_stdev, d.record_length_bytes_resize,
             d.enable_chunking, d.chunk_size, d.compression, r.data_loader, r.batch_size,
             r.read_threads, r.prefetch_size, r.sharding, r.file_shuffle != "off",
             r.sample_shuffle != "off", r.multiprocessing_context, r.dali_native_reader,
             r.file_access, r.decode, r.decoder, r.verify_samples, r.persistent_workers,
             r.pin_memory, world.local_size, len(os.sched_getaffinity(0))]
    return json.dumps(parts, default=str)


def host_load(seconds: float = LOAD_SAMPLE_S) -> dict[str, float] | None:
    """The cores this rank may use and how many of them other work keeps busy now (sampled
    over ``seconds`` while this run reads nothing); None where /proc/stat is missing."""
    import time

    cpus = os.sched_getaffinity(0)
    try:
        busy0, total0 = jiffies(cpus)
        time.sleep(seconds)
        busy1, total1 = jiffies(cpus)
    except (OSError, ValueError):
        return None
    share = (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0
    return {"cores": len(cpus), "busy_cores": round(share * len(cpus), 3)}


def load_matches(then: dict[str, Any], now: dict[str, float] | None) -> bool:
    """Whether a ceiling measured under the load ``then`` holds under the load ``now``:
    the same cores, and about as many of them busy with other work."""
    if now is None or not isinstance(then.get("busy_cores"), (int, float)):
        return False
    slack = max(LOAD_TOLERANCE[0], LOAD_TOLERANCE[1] * now["cores"])
    return bool(then.get("cores") == now["cores"]
                and abs(float(then["busy_cores"]) - now["busy_cores"]) <= slack)


def cache_path() -> Path:
    """The ceiling cache file."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "dliobench" / "ceiling.json"


def entry(config: Config, world: World) -> dict[str, Any] | None:
    """The cached measurement for these settings on this host (None: none, or unreadable)."""
    try:
        found = json.loads(cache_path().read_text()).get(key_of(config, world))
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


def cached(config: Config, world: World, field: str = "samples_per_s_per_rank",
           load: dict[str, float] | None = None) -> float | None:
    """A ceiling measured before for these settings on this host, if any (or another
    figure of that measurement: ``field``); given the host's ``load`` now, only one measured
    under a load that matches it (``load_matches``)."""
    found = entry(config, world) or {}
    value = found.get(field)
    if load is not None and value is not None and not load_matches(found.get("load") or {}, load):
        log.info("the cached client ceiling was measured under another load (%s, now %s): "
                 "measuring it again", found.get("load"), load)
        return None
    return float(value) if isinstance(value, (int, float)) else None


def cached_cpu(config: Config, world: World,
               load: dict[str, float] | None = None) -> float | None:
    """CPU seconds (ranks and loader workers) per sample the ceiling measurement spent
    (under a load matching ``load`` when given)."""
    return cached(config, world, "cpu_s_per_sample", load)


def _remember(config: Config, world: World, value: float, detail: dict[str, Any]) -> None:
    path = cache_path()
    try:
        entries = json.loads(path.read_text()) if path.exists() else {}
        entries[key_of(config, world)] = {"samples_per_s_per_rank": value, **detail}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, entries)
    except (OSError, ValueError) as exc:  # a cache that cannot be written costs a re-measure
        log.warning("cannot cache the client ceiling in %s (%s)", path, exc)


def plan_of(config: Config, world: World, folder: Path) -> Config:
    """The measurement's configuration: the run's reading settings on a copy in memory."""
    d, r = config.dataset, config.reader
    file_bytes = max(1, d.record_length_bytes * d.num_samples_per_file)
    per_epoch = r.batch_size * (COUNTED_STEPS + config.metric.exclude_start_steps
                                + config.metric.exclude_end_steps)
    wanted = math.ceil(per_epoch * world.size / d.num_samples_per_file)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    fits = max(world.size, int(MEMORY_SHARE * memory / world.node_count) // file_bytes)
    files = max(world.size, min(wanted, fits))
    steps = max(1, files * d.num_samples_per_file // world.size // r.batch_size)
    epochs = max(2, math.ceil(COUNTED_STEPS / max(1, steps - 1)) + 1)
    return replace(
        config,
        dataset=replace(d, data_folder=str(folder), num_files_train=files, source="generate",
                        layout="dliobench", npz_member="x", npz_sample_axis=-1,
                        num_subfolders_train=min(d.num_subfolders_train, files)),
        reader=replace(r, odirect=False),  # tmpfs has no O_DIRECT; memory is the point
        train=replace(config.train, computation_time=0.0, computation_time_stdev=0.0,
                      epochs=epochs, total_training_steps=-1, allreduce_bytes=0),
        workflow=replace(config.workflow, generate_data=True, train=True, checkpoint=False,
                         metadata=False),
        storage=replace(config.storage, stage_to="", drop_cache=False),
        metric=replace(config.metric, client_ceiling="off", fail_below_floor=False),
        output=replace(config.output, folder=str(folder / "results")),
    )


def one_node(world: World) -> None:
    """Refuse to measure on several nodes: the probe's copy in /dev/shm is per node, so each
    node measures alone (``dliobench ceiling`` there) and caches it under its host name."""
    if world.node_count > 1:
        raise ConfigError(f"the client ceiling is measured on one node, not "
                          f"{world.node_count}: run `dliobench ceiling` with this workload's "
                          "ranks per node on each node (it is cached by host name), and the "
                          "job's runs use it")


def measure(config: Config, world: World, comm: Comm, run_probe: ProbeRunner,
            load: dict[str, float] | None = None) -> float:
    """Samples/s per rank this host delivers with the run's reading settings (and cache it
    with the host's ``load``, sampled now unless given); ``run_probe`` runs the probe
    (``session.measure_ceiling`` passes ``session.run``)."""
    one_node(world)
    if world.is_root and load is None:
        load = host_load()
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    digest = hashlib.sha1(key_of(config, world).encode()).hexdigest()[:12]
    folder = base / f"dliobench-ceiling-{digest}"
    probe = plan_of(config, world, folder)
    log.info("measuring the client ceiling from %s (%d files, %d epochs)", folder,
             probe.dataset.num_files_train, probe.train.epochs)
    try:
        result = run_probe(probe)
    finally:
        comm.barrier()
        if world.local_rank == 0:
            shutil.rmtree(folder, ignore_errors=True)
    value = 0.0
    if result is not None:
        rate = result["metrics"]["samples_per_s"] or 0.0
        value = rate / world.size
        ranks = result["ranks"]
        samples = sum(r["samples"] for r in ranks)
        cpu = sum(r.get("cpu_s") or 0.0 for r in ranks)
        _remember(config, world, value, {"files": probe.dataset.num_files_train,
                                         "cpu_s_per_sample": cpu / samples if samples else None,
                                         "epochs": probe.train.epochs, "load": load,
                                         "bytes_per_s_per_rank":
                                             (result["metrics"]["bytes_per_s"] or 0.0)
                                             / world.size})
    out: float = comm.bcast(value)
    return out
