"""The predictor: what a workload demands of storage and clients at a given scale, on paper.

Every figure is derived from the resolved workload (the accelerator profile's compute time
per batch and AU floor, the batch size, the sample size and layout, the model size) and the
scale asked for; nothing here is a constant of its own. At the AU floor a step lasts
``compute / floor``, so an accelerator consumes ``batch * floor / compute`` samples/s. The
dataset size follows MLPerf Storage's rule (``dataset.datasize``); client CPU comes from this
host's measured client ceiling when one is cached (``run.ceiling``) under a load matching the
host's now (``load_matches``, the match ``run`` requires), else it is unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dliobench.base.errors import ConfigError
from dliobench.base.units import size_text
from dliobench.comm.world import World
from dliobench.config.schema import Config
from dliobench.dataset.datasize import files_needed
from dliobench.run import ceiling

BATCH_READ_FORMATS = ("parquet",)  # the loaders read a batch's rows of a file in one call


@dataclass(frozen=True)
class Scale:
    """What the prediction is for."""

    accelerators: int
    hosts: int
    host_memory_bytes: int
    write_bytes_per_s: float | None = None  # generation rate, for the generation time
    checkpoint_s: float | None = None  # time budget of one checkpoint write


def _demand(config: Config, scale: Scale) -> dict[str, Any]:
    """Samples, bytes, read requests and file opens per second at the AU floor."""
    d, batch = config.dataset, config.reader.batch_size
    compute, floor = config.train.computation_time, config.metric.au
    if compute <= 0:
        raise ConfigError(f"{config.name} has no compute time per batch "
                          f"(train.computation_time={compute:g}); pick an accelerator with "
                          "--accelerator, or set train.computation_time")
    per_accel = batch * floor / compute
    samples = per_accel * scale.accelerators
    per_request = batch if d.format in BATCH_READ_FORMATS else 1
    return {
        "au_floor": floor, "computation_time_s": compute, "batch_size": batch,
        "sample_bytes": d.record_length_bytes,
        "samples_per_s_per_accelerator": per_accel,
        "samples_per_s_per_accelerator_at_au_1": batch / compute,
        "samples_per_s": samples,
        "bytes_per_s": samples * d.record_length_bytes,
        "bytes_per_s_per_host": samples * d.record_length_bytes / scale.hosts,
        "requests": [{"bytes": per_request * d.record_length_bytes,
                      "per_s": samples / per_request,
                      "what": "one read per " + ("batch of rows of a file" if per_request > 1
                                                 else "sample")}],
        "files_opened_per_s": samples / d.num_samples_per_file,
        "files_opened_note": "one open per sample" if d.num_samples_per_file == 1 else
        f"at least: each file of {d.num_samples_per_file:,} samples opened once per epoch",
    }


def _dataset(config: Config, scale: Scale, samples_per_s: float) -> dict[str, Any]:
    """The honest dataset size, one epoch's time at the floor, and its generation time."""
    d = config.dataset
    size = files_needed(d.record_length_bytes, d.num_samples_per_file, config.reader.batch_size,
                        scale.accelerators, scale.hosts, scale.host_memory_bytes)
    rate = scale.write_bytes_per_s
    return {"files": size.files, "bytes": size.bytes, "deciding_rule": size.deciding_rule,
            "files_for_memory": size.files_for_memory, "files_for_steps": size.files_for_steps,
            "workload_files": d.num_files_train,
            "epoch_s": size.files * d.num_samples_per_file / samples_per_s,
            "write_bytes_per_s": rate,
            "generation_s": size.bytes / rate if rate else None,
            "generation_files_per_s": size.files * rate / size.bytes if rate else None}


def _checkpoint(config: Config, scale: Scale) -> dict[str, Any] | None:
    """One checkpoint's bytes and the write bandwidth its time budget needs."""
    model = config.model.model_size_bytes
    if model <= 0:
        return None
    nbytes = model * (1 + config.checkpoint.optimizer_state_factor)
    budget = scale.checkpoint_s
    return {"bytes": nbytes, "seconds": budget,
            "write_bytes_per_s": nbytes / budget if budget else None}


def _client(config: Config, scale: Scale, per_accel: float) -> dict[str, Any]:
    """Per-host loader memory (prefetched batches) and client CPU from the client ceiling."""
    ranks_per_host = math.ceil(scale.accelerators / scale.hosts)
    r, d = config.reader, config.dataset
    prefetched = ranks_per_host * r.prefetch_size * r.batch_size * d.record_length_bytes
    world = World(local_size=ranks_per_host)
    found = ceiling.entry(config, world)
    load = ceiling.host_load() if found is not None else None  # (sampled only when needed)
    measured = ceiling.cached(config, world, load=load) if found is not None else None
    cpu = ceiling.cached_cpu(config, world, load) if found is not None else None
    then = (found or {}).get("load")
    return {
        "ranks_per_host": ranks_per_host,
        "prefetched_bytes_per_host": prefetched,
        "host_memory_bytes": scale.host_memory_bytes,
        "ceiling_samples_per_s_per_rank": measured,
        "ceiling_load": load,  # the host's load now, which a cached ceiling must match
        "ceiling_stale_load": then if measured is None and isinstance(then, dict) else None,
        "client_keeps_up": None if measured is None else measured >= per_accel,
        "cpu_s_per_sample": cpu,
        "cpu_cores_per_host": None if cpu is None else cpu * per_accel * ranks_per_host,
    }


def predict(config: Config, scale: Scale) -> dict[str, Any]:
    """Every figure of the prediction, as plain data (the ``--json`` document)."""
    demand = _demand(config, scale)
    return {"workload": config.name, "accelerator": config.train.accelerator or "emulated",
            "accelerators": scale.accelerators, "hosts": scale.hosts,
            "demand": demand, "dataset": _dataset(config, scale, demand["samples_per_s"]),
            "checkpoint": _checkpoint(config, scale),
            "client": _client(config, scale, demand["samples_per_s_per_accelerator"])}


def _duration(seconds: float | None, missing: str) -> str:
    if seconds is None:
        return missing
    return f"{seconds:,.0f} s ({seconds / 3600:,.2f} h)" if seconds >= 60 else f"{seconds:.1f} s"


def table(p: dict[str, Any]) -> str:
    """The prediction as lines of 'figure: value' (MB = 10^6 bytes)."""
    dm, ds, cl, ck = p["demand"], p["dataset"], p["client"], p["checkpoint"]
    rows = [
        ("at", f"AU floor {dm['au_floor']:.0%}, {dm['computation_time_s']:g} s per batch of "
               f"{dm['batch_size']:,}, {dm['sample_bytes']:,} B per sample"),
        ("samples/s", f"{dm['samples_per_s']:,.1f} ({dm['samples_per_s_per_accelerator']:,.2f}"
                      f" per accelerator; {dm['samples_per_s_per_accelerator_at_au_1']:,.2f}"
                      " at AU 1)"),
        ("read bandwidth", f"{size_text(dm['bytes_per_s'])}/s "
                           f"({size_text(dm['bytes_per_s_per_host'])}/s per host)"),
        *[("read requests", f"{q['per_s']:,.1f}/s of {size_text(q['bytes'])} ({q['what']})")
          for q in dm["requests"]],
        ("files opened", f"{dm['files_opened_per_s']:,.1f}/s ({dm['files_opened_note']})"),
        ("dataset", f"{ds['files']:,} files, {size_text(ds['bytes'])} (the {ds['deciding_rule']} "
                    f"rule decides; the workload file has {ds['workload_files']:,})"),
        ("epoch at floor", _duration(ds["epoch_s"], "")),
        ("generation", _duration(ds["generation_s"], "unknown: give --write-rate")
         + (f" at {size_text(ds['write_bytes_per_s'])}/s, creating "
            f"{ds['generation_files_per_s']:,.0f} files/s" if ds["write_bytes_per_s"] else "")),
        ("checkpoint", "the workload has no model size" if ck is None else
         f"{size_text(ck['bytes'])} each; " + (
             f"{size_text(ck['write_bytes_per_s'])}/s to write one in {ck['seconds']:g} s"
             if ck["seconds"] else "give --checkpoint-seconds for the bandwidth")),
        ("host memory", f"{size_text(cl['prefetched_bytes_per_host'])} of prefetched batches "
                        f"per host ({cl['ranks_per_host']} rank(s)) of "
                        f"{size_text(cl['host_memory_bytes'])}"),
        ("client CPU", _cpu_text(cl)),
    ]
    width = max(len(k) for k, _ in rows)
    head = (f"{p['workload']} on {p['accelerators']:,} {p['accelerator']} accelerator(s), "
            f"{p['hosts']:,} host(s)")
    return "\n".join([head, *(f"  {k:<{width}}  {v}" for k, v in rows)])


def _cpu_text(cl: dict[str, Any]) -> str:
    stale, now = cl.get("ceiling_stale_load"), cl.get("ceiling_load")
    if cl["ceiling_samples_per_s_per_rank"] is None and stale and now:
        return (f"unknown: the client ceiling cached for these settings was measured with "
                f"{stale.get('busy_cores')} of {stale.get('cores')} cores busy with other work, "
                f"now {now['busy_cores']} of {now['cores']}: not used; run `dliobench ceiling` "
                "(under mpiexec -n RANKS_PER_HOST) again")
    if cl["ceiling_samples_per_s_per_rank"] is None:
        return ("unknown: no client ceiling cached for these settings and ranks per host; "
                "run `dliobench ceiling` (under mpiexec -n RANKS_PER_HOST) first")
    keeps = "keeps up" if cl["client_keeps_up"] else "cannot keep up (client-limited)"
    text = (f"this host's ceiling {cl['ceiling_samples_per_s_per_rank']:,.1f} samples/s per "
            f"rank: the client {keeps}")
    if cl["cpu_cores_per_host"] is not None:
        text += (f"; about {cl['cpu_cores_per_host']:,.2f} of this host's cores per host at the "
                 "floor")
    return text
