"""The ``metadata`` section: the metadata phase's rates and latency percentiles, per rank and
for the job, and its console table."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np

from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.dataset.plan import Plan
from dliobench.results import provenance, sysinfo
from dliobench.results.files import config_dict, new_run_id, write_json
from dliobench.results.schema import SCHEMA_VERSION
from dliobench.run.metadata import OPS, OpTimes, RankTimes, measure, scratch_folder
from dliobench.storage import backend_for

PERCENTILES = {"p50_s": 50.0, "p99_s": 99.0}


def _figures(files: int, seconds: float, latencies: np.ndarray) -> dict[str, Any]:
    """Calls, time, rate and latency percentiles of one operation."""
    out: dict[str, Any] = {"files": files, "seconds": seconds,
                           "ops_per_s": files / seconds if seconds > 0 else None}
    for name, q in PERCENTILES.items():
        out[name] = float(np.percentile(latencies, q)) if latencies.size else None
    out["max_s"] = float(latencies.max()) if latencies.size else None
    return out


def _rank(times: RankTimes) -> dict[str, Any]:
    ops = {op: _figures(times.ops[op].latencies_s.size, times.ops[op].seconds,
                        times.ops[op].latencies_s) for op in OPS}
    return {"rank": times.rank, "host": times.host, "files": times.files, "ops": ops}


def _job(op: str, ranks: list[RankTimes]) -> dict[str, Any]:
    """All ranks' calls over the slowest rank's time; percentiles over every call."""
    parts: list[OpTimes] = [r.ops[op] for r in ranks]
    slowest = max(p.seconds for p in parts)
    every = np.concatenate([p.latencies_s for p in parts])
    return _figures(int(every.size), slowest, every)


def section(ranks: list[RankTimes], data_folder: str, scratch_parent: str) -> dict[str, Any]:
    """The ``metadata`` section of a result from every rank's times."""
    return {
        "data_folder": data_folder,
        "scratch_beside": scratch_parent,
        "files": sum(r.files for r in ranks),
        "ranks_count": len(ranks),
        "ops": {op: _job(op, ranks) for op in OPS},
        "ranks": [_rank(r) for r in ranks],
    }


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1e3:.3f}"


def table(meta: dict[str, Any]) -> str:
    """The section as a fixed-width table (rates in operations per second, latencies in ms)."""
    lines = [f"metadata rates over {meta['files']:,} files of {meta['data_folder']} "
             f"on {meta['ranks_count']} rank(s)",
             f"{'op':<8}{'files':>10}{'job ops/s':>13}{'rank ops/s min-max':>24}"
             f"{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}"]
    for op in OPS:
        job = meta["ops"][op]
        rates = [r["ops"][op]["ops_per_s"] or 0.0 for r in meta["ranks"]]
        rate = "n/a" if job["ops_per_s"] is None else f"{job['ops_per_s']:,.0f}"
        lines.append(f"{op:<8}{job['files']:>10,}{rate:>13}"
                     f"{f'{min(rates):,.0f}-{max(rates):,.0f}':>24}"
                     f"{_ms(job['p50_s']):>10}{_ms(job['p99_s']):>10}{_ms(job['max_s']):>10}")
    return "\n".join(lines)


def metadata_phase(plan: Plan, world: World, comm: Comm, limit: int = 0) -> dict[str, Any]:
    """Run the metadata phase: ``{"metadata": section}`` on rank 0, ``{}`` elsewhere."""
    ranks = measure(plan, world, comm, limit)
    if ranks is None:
        return {}
    folder = plan.config.dataset.data_folder
    return {"metadata": section(ranks, folder, str(scratch_folder(folder, "").parent))}


METADATA_NAME = "metadata.json"


def write_metadata(config: Config, meta: dict[str, Any], launcher: str) -> Path:
    """Commit ``<output.folder>/<run-id>/metadata.json``: the header fields of a result
    (schema, code, machine, storage, configuration) and the ``metadata`` section."""
    run_id = new_run_id(config.name)
    folder = Path(config.output.folder) / run_id
    config_doc = config_dict(config)
    doc = {"schema_version": SCHEMA_VERSION, "run_id": run_id, "kind": "metadata",
           "dliobench_version": sysinfo.version(), "commit": sysinfo.commit(),
           "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "workload": config.name, "launcher": launcher, "config": config_doc,
           "machine": {"hosts": sorted({r["host"] for r in meta["ranks"]}),
                       **sysinfo.machine()},
           "storage": backend_for(config.dataset.data_folder, config.storage).facts(),
           "provenance": provenance.collect(config_doc), "metadata": meta}
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / METADATA_NAME, doc)
    return folder / METADATA_NAME
