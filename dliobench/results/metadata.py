"""The ``metadata`` section: the metadata phase's rates and latency percentiles, per rank and
for the job, its console table and its ``metadata.json`` document; the measurement records
(``OpTimes``, ``RankTimes``) the phase (``run.metadata``) hands in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dliobench.config.schema import Config
from dliobench.results.files import config_dict
from dliobench.results.schema import SCHEMA_VERSION

OPS = ("stat", "open", "close", "create", "unlink")


@dataclass(frozen=True)
class OpTimes:
    """One rank's calls of one operation: the time spent in them and each call's latency."""

    seconds: float
    latencies_s: np.ndarray  # float64, one per call


@dataclass(frozen=True)
class RankTimes:
    """One rank's measurement: its host, its file count and each operation's times."""

    rank: int
    host: str
    files: int
    ops: dict[str, OpTimes]

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


METADATA_NAME = "metadata.json"


def document(config: Config, meta: dict[str, Any], run_id: str, finished: str, launcher: str,
             facts: dict[str, Any]) -> dict[str, Any]:
    """``metadata.json``: the header fields of a result (schema, code, machine, storage,
    configuration: ``facts`` as ``run.facts.run_facts`` takes them) and the ``metadata``
    section."""
    return {"schema_version": SCHEMA_VERSION, "run_id": run_id, "kind": "metadata",
            "dliobench_version": facts["dliobench_version"], "commit": facts["commit"],
            "finished_at": finished, "workload": config.name, "launcher": launcher,
            "config": config_dict(config),
            "machine": {"hosts": sorted({r["host"] for r in meta["ranks"]}),
                        **facts["machine"]},
            "storage": facts["storage"], "provenance": facts["provenance"], "metadata": meta}
