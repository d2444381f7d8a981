"""Result folders -> one pandas table (a row per run) and the config values that differ.

Only reads ``result.json`` and ``timeline.csv`` (docs/results.md, "Result files"); never reruns.
Columns carry their unit in the name (``mb_per_s`` = 10^6 B/s, ``wait_p50_ms``). Finding
and reading the folders: ``report.runs``; each run's label: ``report.labels``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dliobench.base.errors import DlioBenchError
from dliobench.report.factors import differing_keys, factors_of, flatten
from dliobench.report.labels import run_labels
from dliobench.report.runs import Run, RunSet
from dliobench.results.schema import RunResult
from dliobench.results.storage_reads import page_cache_possible, read_origin
from dliobench.results.verdict import verdict_words

# Keys that differ between runs without changing what was measured (``accelerators`` holds
# the profiles; the one in use is resolved into train.computation_time and metric.au).
IGNORED_KEYS = frozenset({"output.folder", "output.label"})
IGNORED_SECTIONS = ("accelerators",)


def _settings(run: Run) -> dict[str, Any]:
    """What the run was asked to do: its flattened config plus the workload name."""
    flat = flatten(run.result.get("config", {}))
    flat["workload"] = run.result.get("workload")
    return {k: v for k, v in flat.items()
            if k not in IGNORED_KEYS and k.split(".", 1)[0] not in IGNORED_SECTIONS}


def _mb(x: Any) -> float | None:
    return None if x is None else x / 1e6


def _ms(x: Any) -> float | None:
    return None if x is None else x * 1e3


NUMERIC = ("au", "au_min", "au_floor", "samples_per_s", "mb_per_s", "wait_p50_ms",
           "wait_p99_ms")


def _row(run: Run) -> dict[str, Any]:
    """The headline columns of one run."""
    res, m = run.result, run.result.get("metrics") or {}
    machine = res.get("machine") or {}
    return {
        "run_id": run.run_id, "workload": res.get("workload"), "status": res.get("status"),
        "role": run.role,
        "ranks": res.get("ranks_count", len(res.get("ranks") or []) or None),
        "accelerator": run.emulated.label,
        "compute_s_per_batch": run.config("train.computation_time"),
        "loader": run.config("reader.data_loader"), "format": run.config("dataset.format"),
        "samples_per_file": run.config("dataset.num_samples_per_file"),
        "subfolders": run.config("dataset.num_subfolders_train"),
        "file_access": run.config("reader.file_access"),
        "read_threads": run.config("reader.read_threads"),
        "batch": run.config("reader.batch_size"),
        "au": m.get("au"), "verdict": verdict_words(res["verdict"]) if res.get("verdict") else "",
        "au_min": m.get("au_min"),
        "au_floor": None if _no_training(res) else run.config("metric.au"),
        "samples_per_s": m.get("samples_per_s"), "mb_per_s": _mb(m.get("bytes_per_s")),
        "wait_p50_ms": _ms(m.get("wait_p50_s")), "wait_p99_ms": _ms(m.get("wait_p99_s")),
        **_checkpoint_rates(res.get("checkpoint") or {}),
        "page_cache_possible": page_cache_possible(res),
        "reads_from_storage": _storage_words(res),
        "dliobench_version": res.get("dliobench_version"), "commit": res.get("commit"),
        "hosts": " ".join(machine.get("hosts") or [machine.get("host") or ""]).strip(),
        **_straggler_nodes(res),
    }


def _straggler_nodes(result: RunResult) -> dict[str, str]:
    """For a run on more than one node, the nodes whose samples/s per rank held the others up
    (metrics.straggler_nodes, as its console says them), or "none"; no column otherwise, so a
    report of one-node runs shows none."""
    if len(result.get("nodes") or []) < 2:
        return {}
    slow = (result.get("metrics") or {}).get("straggler_nodes") or []
    return {"straggler_nodes": ", ".join(slow) or "none"}


def _storage_words(result: RunResult) -> str:
    """The run's console line "reads from storage" (``results.storage_reads``, the one
    rule): ``yes (evicted)``, ``partly: ...``, ``not ensured ...``, or empty when it measured
    no reads."""
    return read_origin(result).words()


def _no_training(result: RunResult) -> bool:
    """A checkpoint-only, KV-cache or vector-database run: no training, so no AU and no AU
    floor."""
    return (result.get("kvcache") is not None or result.get("vectordb") is not None or
            (result.get("checkpoint") or {}).get("workflow") == "checkpoint-only")


def _checkpoint_rates(ckpt: dict[str, Any]) -> dict[str, float | None]:
    """Checkpoint write and read GB/s of either workflow, when the run wrote checkpoints."""
    if not ckpt:
        return {}
    if ckpt.get("workflow") == "checkpoint-only":
        rates = [(ckpt.get(op) or {}).get("aggregate_bytes_per_s") for op in ("write", "read")]
    else:
        rates = [ckpt.get("write_bytes_per_s"), ckpt.get("read_bytes_per_s")]
    return {"ckpt_write_gb_per_s": None if rates[0] is None else rates[0] / 1e9,
            "ckpt_read_gb_per_s": None if rates[1] is None else rates[1] / 1e9}


def run_set(runs: list[Run]) -> RunSet:
    """The table of ``runs``: headline columns, then each differing config value."""
    if not runs:
        raise DlioBenchError("no runs to report")
    settings = [_settings(r) for r in runs]
    diff = differing_keys(settings)
    rows = [{**_row(r), "user_label": r.config("output.label", ""),
             **{k: s.get(k) for k in diff if k != "workload"}}
            for r, s in zip(runs, settings, strict=True)]
    table = pd.DataFrame(rows)
    for col in NUMERIC:
        table[col] = pd.to_numeric(table[col], errors="coerce").astype(float)
    factors = factors_of(settings, diff)
    table["label"] = run_labels(table, factors)
    return RunSet(runs, table, diff, factors)
