"""Build ``result.json`` from the traces every rank measured (docs/ARCHITECTURE.md, "Result
files are an interface"; its fields: docs/results.md)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np

from dliobench.config.schema import Config
from dliobench.dataset.bounds import batches_ahead
from dliobench.results import metrics
from dliobench.results.files import config_dict
from dliobench.results.measured import RankTrace
from dliobench.results.node_wire import add_wire, wire_total
from dliobench.results.nodes import machines_memory, per_node, straggler_nodes
from dliobench.results.schema import (
    SCHEMA_VERSION,
    EpochMetrics,
    Honesty,
    NodeMetrics,
    RankMetrics,
    RunMetrics,
    RunResult,
)
from dliobench.results.storage_reads import dataset_origin
from dliobench.results.verdict import Bar, busy_hosts, time_shares, verdict
from dliobench.storage.latency import LatencyLog
from dliobench.storage.location import is_url


def _epoch_table(config: Config, trace: RankTrace) -> dict[int, tuple[dict[str, Any], np.ndarray]]:
    """Per epoch of one rank: its metrics and its counted waits."""
    m = config.metric
    out = {}
    for epoch, cols in trace.timeline.by_epoch().items():
        win = metrics.window(cols["step"].size, m.exclude_start_steps, m.exclude_end_steps)
        out[epoch] = (metrics.epoch_metrics(cols, m.exclude_start_steps, m.exclude_end_steps),
                      cols["wait_s"][win])
    return out


def run_metrics(config: Config, traces: list[RankTrace]) -> tuple[dict[str, Any],
                                                                    list[dict[str, Any]],
                                                                    list[dict[str, Any]]]:
    """(run metrics, per-epoch metrics, per-rank metrics) from all ranks' traces."""
    tables = [_epoch_table(config, t) for t in traces]
    epochs = sorted({e for table in tables for e in table})
    all_waits = [w for table in tables for _, w in table.values()]
    waits = np.concatenate(all_waits) if all_waits else np.empty(0)
    run = metrics.combine_ranks([[em for em, _ in table.values()] for table in tables], waits)
    checks = [c for t in traces for c in t.checks]
    interrupted = any(not table.keys() <= {c.epoch for c in t.checks}
                      for t, table in zip(traces, tables, strict=True))
    run["exactly_once"] = None if interrupted else bool(checks) and all(
        c.exactly_once for c in checks)
    run["undelivered_samples"] = sum(c.undelivered for c in checks)
    counted = [em["steps"] for table in tables for em, _ in table.values() if em["steps"]]
    run["min_counted_steps"] = min(counted) if counted else 0
    logs = [t.requests for t in traces if t.requests is not None]
    if logs:  # an object store's reads: every rank's requests in one set of percentiles
        merged = LatencyLog()
        for log in logs:
            merged.merge(log)
        run["requests"] = merged.summary()
    per_epoch = []
    for e in epochs:
        parts = [[table[e][0]] for table in tables if e in table]
        w = [table[e][1] for table in tables if e in table]
        row = {"epoch": e, **metrics.combine_ranks(parts, np.concatenate(w))}
        ce = [c for c in checks if c.epoch == e]
        ranks_in = sum(1 for table in tables if e in table)  # ranks with steps in it
        if len(ce) < ranks_in:  # a rank was interrupted in this epoch: nothing to check
            row["exactly_once"], row["complete"] = None, False
        else:
            row["exactly_once"] = all(c.exactly_once for c in ce)
            row["complete"] = all(c.complete for c in ce)
        per_epoch.append(row)
    per_rank = []
    for trace, table in zip(traces, tables, strict=True):
        summary = metrics.rank_summary([em for em, _ in table.values()])
        cpu_share = (trace.cpu_s / (trace.cpu_wall_s * trace.cpu_cores)
                     if trace.cpu_cores and trace.cpu_wall_s else None)
        reads = trace.device_reads
        per_rank.append({"rank": trace.rank, "host": trace.host, **summary,
                         "cpu_s": trace.cpu_s, "cpu_cores": trace.cpu_cores,
                         "cpu_share": cpu_share,
                         "device_read_bytes": reads.nbytes if reads else None,
                         "epochs": [dataclasses.asdict(c) for c in trace.checks]})
    run["stragglers"] = metrics.stragglers(per_rank)
    return run, per_epoch, per_rank


READAHEAD_SHARE_WARN = 0.2


def metered_bytes(config: Config, traces: list[RankTrace]) -> int:
    """The bytes delivered while the device-read meter ran: each epoch's steps up to the end
    of its counted window (the steps before it included: the loader read ahead for them)."""
    m = config.metric
    total = 0
    for trace in traces:
        for cols in trace.timeline.by_epoch().values():
            nbytes = cols["bytes"]
            total += int(nbytes[:metrics.window(nbytes.size, m.exclude_start_steps,
                                                m.exclude_end_steps).stop].sum())
    return total


def device_reads(traces: list[RankTrace], delivered: int) -> dict[str, Any]:
    """The bytes read from the storage device from each epoch's first read to the end of
    its counted window, summed over ranks.

    ``device_read_bytes`` is None when a rank's counter could not see its reads (the
    counter says why), unless every node counted what crossed the wire to it: on a network
    file system those are the bytes from below the page cache (``node_wire.wire_total``);
    ranks that are threads of one process measured the same process, so it counts once (the
    largest of their figures). ``device_read_share`` divides it by the bytes the loaders
    ``delivered`` in those steps; readahead can take it above 1.
    """
    reads = [t.device_reads for t in traces]
    known = [r for r in reads if r is not None]
    if not known or len(known) < len(reads):
        return {"device_read_bytes": None, "device_read_share": None,
                "device_read_counter": "not measured: no rank read the dataset"}
    unseen = next((r for r in known if r.nbytes is None), None)
    wire = wire_total(traces) if unseen is not None else None
    if wire is not None:  # a network file system: the bytes from below the cache crossed it
        return {"device_read_bytes": wire[0],
                "device_read_share": wire[0] / delivered if delivered else None,
                "device_read_counter": wire[1]}
    if unseen is not None:
        return {"device_read_bytes": None, "device_read_share": None,
                "device_read_counter": f"unknown: {unseen.counter}"}
    per_process: dict[tuple[str, int], int] = {}
    for trace, r in zip(traces, known, strict=True):
        key = (trace.host, r.pid)
        per_process[key] = max(per_process.get(key, 0), r.nbytes or 0)
    total = sum(per_process.values())
    return {"device_read_bytes": total,
            "device_read_share": total / delivered if delivered else None,
            "device_read_counter": known[0].counter}


def honesty(config: Config, dataset_bytes: int, host_memory: int, evicted: bool,
            min_counted_steps: int = 0, reads: dict[str, Any] | None = None) -> Honesty:
    """Could these reads have come from RAM rather than storage, or before the window?

    ``readahead_share``: the largest share of an epoch's counted batches that the loader may
    have read before the counted window opened (its prefetch queue plus the batch in flight),
    which rates then count as if read in no time. ``reads``: what ``device_reads`` measured
    (where the bytes came from, rather than where they could have).
    """
    odirect = config.reader.odirect
    readahead = max(1, batches_ahead(config)) + 1
    share = min(1.0, readahead / min_counted_steps) if min_counted_steps else None
    out: Honesty = {
        "readahead_share": share,
        "window_too_short": share is not None and share > READAHEAD_SHARE_WARN,
        "dataset_bytes": dataset_bytes,
        "host_memory_bytes": host_memory,
        # MLPerf Storage's rule: a dataset of at least 5x the hosts' memory keeps the cache
        # marginal (``host_memory``: every machine's, once; dataset.datasize cites upstream)
        "dataset_to_memory_ratio": dataset_bytes / host_memory if host_memory else None,
        "odirect": odirect,
        "evicted": evicted,
        "page_cache_possible": True,  # decided below, by the one rule
        "data_origin": data_origin(config),
    }
    out.update(cast(Honesty, reads or device_reads([], 0)))
    # results.storage_reads decides, from the read mode and the measured device share, as
    # every output does (an object store's reads never come from this host's page cache;
    # its server's memory is another matter: the console says so)
    origin = dataset_origin(dict(out), is_url(config.dataset.data_folder))
    out["page_cache_possible"] = bool(origin.page_cache_possible)
    return out


def data_origin(config: Config) -> str:
    """Whose files the run read: dliobench's synthetic ones, or an existing dataset's."""
    d = config.dataset
    if d.source != "existing":
        return "synthetic files generated by dliobench"
    whose = "a dataset DLIO generated" if d.layout == "dlio" else "the user's own files"
    return f"{whose} in {d.data_folder}, read as found (indexed, not generated by dliobench)"


def build_result(config: Config, run_id: str, status: str, traces: list[RankTrace],
                 started: str, finished: str, dataset_bytes: int,
                 extra: dict[str, Any], facts: dict[str, Any]) -> RunResult:
    """The whole result document: a pure function of the ranks' traces, the configuration
    and the run's ``facts`` (``run.facts.run_facts``, taken where the run ran)."""
    machine = facts["machine"]
    run, per_epoch, per_rank = run_metrics(config, traces)
    nodes = per_node(per_rank, traces, extra.get("staging"))
    add_wire(nodes, traces, {h: metered_bytes(config, [t for t in traces if t.host == h])
                             for h in {t.host for t in traces}},
             Bar.of(config))
    run["straggler_nodes"] = straggler_nodes(nodes)
    errors = [f"rank {t.rank}: {t.error}" for t in traces if t.error]
    doc: RunResult = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "status": status,
        "dliobench_version": facts["dliobench_version"],
        "commit": facts["commit"],
        "started_at": started,
        "finished_at": finished,
        "workload": config.name,
        "ranks_count": len(traces),
        "config": config_dict(config),
        "machine": {"hosts": sorted({t.host for t in traces}), **machine},
        "storage": facts["storage"],
        "honesty": honesty(config, dataset_bytes,
                           machines_memory(traces) or machine["memory_bytes"],
                           evicted=config.storage.drop_cache,
                           min_counted_steps=run["min_counted_steps"],
                           reads=device_reads(traces, metered_bytes(config, traces))),
        "metrics": cast(RunMetrics, run),
        "epochs": cast(list[EpochMetrics], per_epoch),
        "ranks": cast(list[RankMetrics], per_rank),
        "nodes": cast(list[NodeMetrics], nodes),
    }
    shares = time_shares(run)
    doc["time_shares"] = shares
    doc["verdict"] = verdict(Bar.of(config), run, shares, doc["honesty"], busy_hosts(nodes))
    doc["provenance"] = facts["provenance"]
    if errors:
        doc["errors"] = errors
    deviations = sorted({d for t in traces for d in t.deviations})
    if deviations:
        doc["deviations"] = deviations
    checkpoints = checkpoint_summary(traces)
    if checkpoints:
        doc["checkpoint"] = checkpoints
    doc.update(cast(RunResult, extra))
    return doc


def checkpoint_summary(traces: list[RankTrace]) -> dict[str, Any] | None:
    """Per checkpoint: bytes summed over ranks, time of the slowest rank, and GB/s from both."""
    by_index: dict[int, list[Any]] = {}
    for trace in traces:
        for event in trace.checkpoints:
            by_index.setdefault(event.index, []).append(event)
    if not by_index:
        return None
    rows = []
    for index, events in sorted(by_index.items()):
        nbytes = sum(e.nbytes for e in events)
        write_s = max(e.write_s for e in events)
        reads = [e.read_s for e in events if e.read_s is not None]
        read_s = max(reads) if reads else None
        rows.append({"index": index, "epoch": events[0].epoch, "step": events[0].step,
                     "bytes": nbytes, "write_s": write_s,
                     "write_bytes_per_s": nbytes / write_s if write_s > 0 else None,
                     "read_s": read_s,
                     "read_bytes_per_s": nbytes / read_s if read_s else None})
    total = sum(r["bytes"] for r in rows)
    write_total = sum(r["write_s"] for r in rows)
    read_total = sum(r["read_s"] or 0.0 for r in rows)
    return {"count": len(rows), "bytes": total,
            "write_bytes_per_s": total / write_total if write_total > 0 else None,
            "read_bytes_per_s": total / read_total if read_total > 0 else None,
            "checkpoints": rows}
