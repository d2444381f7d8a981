"""``summary.json`` as DLIO writes it, built from our ``result.json``, so that tools made for
DLIO's output (mlpstorage's reportgen and rules checks, users' scripts) read our runs.

Field names, units and meaning follow DLIO's writer,
argonne-lcf/dlio_benchmark ``dlio_benchmark/utils/statscounter.py``:

- @866828cef4c741b33ab351ba81c179ec15b002ef (tag v2.0.0; the PyPI dlio-benchmark 2.0.0 wheel
  holds the same file, line endings aside): the top-level keys, ``epochs`` and the training
  ``metric`` (``end_run``): per-epoch AU in percent averaged over ranks, per-epoch samples/s
  summed over ranks, their means and population stdevs (``np.mean``/``np.std``) over epochs,
  MB/s = samples/s x ``record_length`` / 1024 / 1024, ``train_au_meet_expectation``
  ``'success'`` when the mean AU >= ``au`` x 100 else ``'fail'``.
- @392621b230472c4206e4299ece689700e07544a4 (branch mlperf_storage_v2.0, which
  mlcommons/storage ``pyproject.toml``@caa90c9c7d6a543de815222fff834a846823f922 pins):
  ``num_hosts`` = nodes, training figures only when training ran, and the checkpoint figures
  (``save_``/``load_checkpoint_io_mean_GB_per_second`` and stdev: checkpoint GiB over each
  checkpoint's time between barriers, ``_duration_mean_seconds`` and stdev,
  ``checkpoint_size_GB``).
- mlcommons/DLIO_local_changes @2a9cf78b8361a936ab15fb54d00d08d6b4daf096 (v3.0.2, the engine
  MLPerf Storage v3.0 ran: mlcommons/storage ``pyproject.toml``@dfe7b1f9 takes its ``main``;
  its statscounter.py is the one of @9cef4fa4, v3.0.1), where it differs from the two above
  the figures follow it (docs/results.md, "summary.json", lists every difference that moves a
  figure): each epoch's AU and samples/s over the steps but the first
  ``metric.exclude_start_steps`` and the last ``exclude_end_steps`` (``compute_metrics_train``),
  an epoch whose window is empty counted as AU 0 and 0 samples/s (kept in the lists and in
  ``epochs``), the checkpoint figures only for a direction that ran (``end_run``).
- ``start``/``end``: ``utils/utility.py`` ``utcnow()`` at both commits, which despite its name
  is ``datetime.now().strftime("%Y-%m-%dT%H:%M:%S.%f")``: the host's local time, no zone.

What mlpstorage reads of it: mlcommons/storage ``mlpstorage_py/rules/models.py``
@141e55e1e9228fd7e6a154900247cac412bcd0e3 (``DLIOResultParser``: ``start``, ``end``,
``num_accelerators``, the list-valued ``metric`` keys; ``ClusterInformation.
from_dlio_summary_json``: ``host_memory_GB``, ``host_cpu_count``).

Where we differ from DLIO, our own top-level ``dliobench`` section says so (docs/results.md,
"summary.json"); DLIO fields we cannot fill are left out
(``host_cpuinfo``, ``host_meminfo``, the ``eval_*`` figures: we run no evaluation).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import numpy as np

from dliobench.results.kv_summary import kv_summary
from dliobench.results.schema import RunResult
from dliobench.results.storage_reads import page_cache_possible

SUMMARY_NAME = "summary.json"
GIB = 1024**3
MIB = 1024**2
DLIO_TIME = "%Y-%m-%dT%H:%M:%S.%f"


def dlio_time(iso: str | None) -> str | None:
    """An ISO 8601 time of ours as DLIO writes times: local, no zone, microseconds."""
    try:
        return dt.datetime.fromisoformat(iso or "").astimezone().strftime(DLIO_TIME)
    except ValueError:
        return None


def _spread(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and population stdev (DLIO's ``np.mean``, ``np.std``), None of nothing."""
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values))


def _hosts(result: dict[str, Any]) -> dict[str, Any]:
    """DLIO's per-host figures: one entry per host, ours taken on rank 0's host."""
    machine, dataset = result["machine"], result["config"]["dataset"]
    hosts = max(len(machine.get("hosts") or []), 1)
    ranks = max(int(result.get("ranks_count") or 0), 1)
    per_node = next((len(n["ranks"]) for n in result.get("nodes") or []
                     if n.get("host") == machine.get("host")), ranks)
    memory_gib = float(machine.get("memory_bytes") or 0) / GIB
    samples = int(dataset["num_samples_per_file"]) * int(dataset["num_files_train"])
    data_gib = per_node * samples // ranks * int(dataset["record_length_bytes"]) / GIB
    return {"host_cpu_count": [int(machine.get("cpus") or 0)] * hosts,
            # DLIO: platform.processor(), a string; ours names the CPU (/proc/cpuinfo)
            "host_processor_name": machine.get("cpu_model") or "",
            "potential_caching": [1 if memory_gib > data_gib else 0] * hosts,
            "host_memory_GB": [memory_gib] * hosts,
            "data_size_per_host_GB": data_gib}


def _per_epoch(result: dict[str, Any]) -> tuple[list[int], list[float], list[float],
                                               list[float]]:
    """(epochs, AU %, samples/s, measured bytes/s) of every epoch; an epoch with too few
    steps to count (no figures in result.json) is AU 0 and 0 samples/s, as v3.0's
    ``compute_metrics_train`` makes an empty window (DLIO_local_changes@2a9cf78)."""
    rows = result.get("epochs") or []
    return ([int(e["epoch"]) for e in rows], [100.0 * float(e.get("au") or 0.0) for e in rows],
            [float(e.get("samples_per_s") or 0.0) for e in rows],
            [float(e.get("bytes_per_s") or 0.0) for e in rows])


def train_metric(result: dict[str, Any]) -> dict[str, Any]:
    """DLIO's training ``metric`` keys (statscounter ``end_run``)."""
    config = result["config"]
    _, au, rate, _ = _per_epoch(result)
    au_mean, au_std = _spread(au)
    rate_mean, rate_std = _spread(rate)
    record = int(config["dataset"]["record_length_bytes"]) / MIB
    floor = 100.0 * float(config["metric"]["au"])
    return {
        "train_au_percentage": au,
        "train_au_mean_percentage": au_mean,
        "train_au_meet_expectation": "success" if (au_mean or 0.0) >= floor else "fail",
        "train_au_stdev_percentage": au_std,
        "train_throughput_samples_per_second": rate,
        "train_throughput_mean_samples_per_second": rate_mean,
        "train_throughput_stdev_samples_per_second": rate_std,
        "train_io_mean_MB_per_second": None if rate_mean is None else rate_mean * record,
        "train_io_stdev_MB_per_second": None if rate_std is None else rate_std * record,
    }


def _checkpoint_ops(ckpt: dict[str, Any], op: str) -> list[tuple[int, float]]:
    """(bytes, seconds) of each checkpoint's ``op`` ("write" or "read"): a checkpoint-only
    run's slowest-rank durations, or the checkpoints taken during training."""
    if ckpt.get("workflow") == "checkpoint-only":
        rows = (ckpt.get(op) or {}).get("checkpoints") or []
        return [(int(r["bytes"]), float(r["duration_s"])) for r in rows if r["duration_s"]]
    key = "write_s" if op == "write" else "read_s"
    return [(int(r["bytes"]), float(r[key])) for r in ckpt.get("checkpoints") or []
            if r.get(key)]


def checkpoint_metric(result: dict[str, Any]) -> dict[str, Any]:
    """DLIO's checkpoint ``metric`` keys (mlperf_storage_v2.0 ``end_run``); a direction that
    did not run is left out (DLIO writes NaN for writes that did not run)."""
    ckpt = result.get("checkpoint") or {}
    out: dict[str, Any] = {}
    sizes: list[int] = []
    for op, name in (("write", "save"), ("read", "load")):
        ops = _checkpoint_ops(ckpt, op)
        if not ops:
            continue
        sizes += [b for b, _ in ops]
        io_mean, io_std = _spread([b / GIB / s for b, s in ops])
        s_mean, s_std = _spread([s for _, s in ops])
        out.update({f"{name}_checkpoint_io_mean_GB_per_second": io_mean,
                    f"{name}_checkpoint_io_stdev_GB_per_second": io_std,
                    f"{name}_checkpoint_duration_mean_seconds": s_mean,
                    f"{name}_checkpoint_duration_stdev_seconds": s_std})
    if sizes:
        out["checkpoint_size_GB"] = max(sizes) / GIB
    return out


def ours(result: dict[str, Any]) -> dict[str, Any]:
    """Our own section: where the figures come from and how their definitions differ."""
    config, hosts = result["config"], len(result["machine"].get("hosts") or [])
    out: dict[str, Any] = {
        "result": "result.json", "run_id": result.get("run_id"),
        "dliobench_version": result.get("dliobench_version"),
        "host_figures": "rank 0's host" + (f", repeated for each of {hosts} hosts"
                                           if hosts > 1 else ""),
        "page_cache_possible": page_cache_possible(cast(RunResult, result)),
    }
    if config["workflow"].get("train"):
        metric = config["metric"]
        epochs, _, _, _ = _per_epoch(result)
        # read_MB_per_second and read_MiB_per_second: the bytes the loader read, as the
        # console prints them, filled in from results.figures by the writer (files.py)
        out.update({
            "epochs_in_metric": epochs,
            "epochs_without_counted_steps": [int(e["epoch"]) for e in result.get("epochs")
                                             or [] if e.get("au") is None],
            "counted_steps": (f"each epoch's steps but its first "
                              f"{metric['exclude_start_steps']} and last "
                              f"{metric['exclude_end_steps']} (metric.exclude_*_steps); AU "
                              "and samples/s over the same window")})
    if result.get("checkpoint"):
        out["checkpoint_figures"] = ("each checkpoint's bytes summed over ranks, over the "
                                     "slowest rank's time")
    return out


def dlio_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The ``summary.json`` DLIO would write for the run ``result`` holds (keys in DLIO's
    order, then our ``dliobench`` section); a KV-cache run's is upstream's KV-cache results
    file instead (``results.kv_summary``)."""
    if result.get("kvcache") is not None:
        return kv_summary(result)
    if result.get("vectordb") is not None:  # upstream's statistics.json fields, then ours
        from dliobench.results.vdb_figures import summary_json

        return summary_json(result)
    config = result["config"]
    metric: dict[str, Any] = {}
    if config["workflow"].get("checkpoint"):
        metric.update(checkpoint_metric(result))
    trained = bool(config["workflow"].get("train"))
    if trained:
        metric.update(train_metric(result))
    hosts = _hosts(result)
    return {
        "start": dlio_time(result.get("started_at")),
        "num_accelerators": result.get("ranks_count"),
        "num_hosts": max(len(result["machine"].get("hosts") or []), 1),
        "hostname": result["machine"].get("host"),
        "metric": metric,
        "num_files_train": config["dataset"]["num_files_train"],
        "num_files_eval": 0,
        "num_samples_per_file": config["dataset"]["num_samples_per_file"],
        **hosts,
        "epochs": len(_per_epoch(result)[0]) if trained else 0,
        "end": dlio_time(result.get("finished_at")),
        "dliobench": ours(result),
    }


def datagen_summary(config: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """The ``summary.json`` of a datagen leaf: DLIO's keys of a run that only generated
    (``generate_only``: no ``metric`` figures, ``epochs`` 0), from the configuration (plain
    data) and ``facts``: ``ranks``, ``started``/``finished`` (ISO times), ``machine``
    (``results.sysinfo.machine``'s host, cpus, memory_bytes)."""
    machine = {**facts.get("machine", {}), "hosts": [facts.get("machine", {}).get("host")]}
    as_run: dict[str, Any] = {"machine": machine, "config": config,
                              "ranks_count": facts.get("ranks"), "nodes": []}
    return {"start": dlio_time(facts.get("started")), "num_accelerators": facts.get("ranks"),
            "num_hosts": 1, "hostname": machine.get("host"), "metric": {},
            "num_files_train": config["dataset"]["num_files_train"], "num_files_eval": 0,
            "num_samples_per_file": config["dataset"]["num_samples_per_file"],
            **_hosts(as_run), "epochs": 0, "end": dlio_time(facts.get("finished")),
            "dliobench": {"command": "datagen", "run_id": facts.get("run_id")}}
