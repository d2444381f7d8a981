"""What mlpstorage's ``reports reportgen --results-dir R`` leaves and says, for dliobench's runs.

Upstream's (mlcommons/storage ``mlpstorage_py/report_generator.py``
@dfe7b1f94cdd6010ee02b0f2247c32dca8cdddae, ``ReportGenerator``) finds the runs under R, judges
each CLOSED, OPEN or INVALID, prints them by category, and writes ``R/results.json`` (a list,
one ``BenchmarkRun.as_dict()`` per run: ``run_id``, ``benchmark_type``, ``model``, ``command``,
``num_processes``, ``parameters``, ``system_info``, ``metrics``, and ``accelerator`` when there
is one; ``mlpstorage_py/rules/models.py``@be69aeb5dccb701ae207b27820b7ae7c7bcf80b1) and
``R/results.csv`` (each of those flattened with '.'-joined keys, NaN values dropped, the
columns the sorted union of keys: ``write_csv_file``, ``utils.flatten_nested_dict``,
``remove_nan_values``). The run id is ``<benchmark_type>_<command>_<model>_<run_datetime>``
(``RunID.__str__``).

Here the runs are the folders with a ``result.json`` (``report.runs.find_run_dirs``); the
verdict of each is our ``dliobench check``'s (``report/rules``), run once per division: CLOSED
when every check of the run passes as CLOSED, OPEN when they pass as OPEN, else INVALID, with
the failing checks' sentences as its issues. ``parameters`` is DLIO's ``workload`` record of
the run (``dlio_config/config.yaml``), ``metrics`` and ``system_info`` come from its
``summary.json`` (as v2.0's reportgen and v3.0's ``DLIOResultParser`` read them).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from dliobench.config.mlpstorage import model_of
from dliobench.report.rules import registry
from dliobench.report.rules.finding import FAIL, Finding
from dliobench.report.runs import Run
from dliobench.results.mlpstorage_files import HYDRA_SUBDIR, benchmark_type
from dliobench.storage.atomic import write_atomic, write_json_atomic

CATEGORIES = ("CLOSED", "OPEN", "INVALID")
GIB = 1024**3


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _workload(folder: Path, result: dict[str, Any]) -> dict[str, Any]:
    """DLIO's ``workload`` record of the run, or our configuration where there is none."""
    try:
        doc = yaml.safe_load((folder / HYDRA_SUBDIR / "config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        doc = None
    workload = doc.get("workload") if isinstance(doc, dict) else None
    return workload if isinstance(workload, dict) else dict(result.get("config") or {})


def run_id(run: Run) -> str:
    """upstream's ``RunID``: ``<benchmark_type>_<command>_<model>_<run_datetime>``, the run's
    datetime its folder's name under mlpstorage's layout (else our run id)."""
    config: dict[str, Any] = dict(run.result.get("config") or {})
    model = model_of(str((config.get("model") or {}).get("name") or run.run_id))
    return f"{benchmark_type(dict(config))}_run_{model}_{run.path.name}"


def as_dict(run: Run) -> dict[str, Any]:
    """One run as upstream's ``BenchmarkRun.as_dict()`` gives it."""
    result: dict[str, Any] = dict(run.result)
    config: dict[str, Any] = result.get("config") or {}
    summary = _json(run.path / "summary.json")
    memory, cpus = summary.get("host_memory_GB") or [], summary.get("host_cpu_count") or []
    kind = benchmark_type(dict(config))
    out: dict[str, Any] = {
        "run_id": run_id(run), "benchmark_type": kind,
        "model": model_of(str((config.get("model") or {}).get("name") or "")),
        "command": "run", "num_processes": result.get("ranks_count"),
        "parameters": _workload(run.path, result),
        "system_info": {"total_memory_bytes": sum(memory) * GIB, "total_cores": sum(cpus),
                        "num_hosts": summary.get("num_hosts")} if summary else None,
        "metrics": summary.get("metric")}
    accelerator = (config.get("train") or {}).get("accelerator")
    if kind == "training" and accelerator:
        out["accelerator"] = str(accelerator)
    return out


def flatten(doc: dict[str, Any], parent: str = "") -> dict[str, Any]:
    """Nested keys joined by '.', as upstream's ``flatten_nested_dict``; NaN values dropped
    (``remove_nan_values``)."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        name = f"{parent}.{key}" if parent else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, name))
        elif not (isinstance(value, float) and math.isnan(value)):
            out[name] = value
    return out


def csv_text(rows: list[dict[str, Any]]) -> str:
    """``results.csv``: the flattened rows under the sorted union of their keys."""
    flat = [flatten(r) for r in rows]
    names = sorted({k for r in flat for k in r})
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    return buffer.getvalue()


def _failures(findings: Iterable[Finding], subject: str) -> list[Finding]:
    return [f for f in findings if f.subject == subject and f.status == FAIL]


def categories(runs: list[Run]) -> list[tuple[Run, str, list[str]]]:
    """(run, CLOSED/OPEN/INVALID, issues) of each run, from our checks run as CLOSED and as
    OPEN; issues are the sentences of the checks the run fails in its category's division
    (CLOSED's when it is CLOSED or INVALID)."""
    closed = registry.apply(runs, "closed")
    opened = registry.apply(runs, "open")
    out = []
    for run in runs:
        fails_closed, fails_open = _failures(closed, run.run_id), _failures(opened, run.run_id)
        category = "CLOSED" if not fails_closed else "OPEN" if not fails_open else "INVALID"
        shown = fails_open if category == "OPEN" else fails_closed
        out.append((run, category, [f"{f.check}: {f.sentence}" for f in shown]))
    return out


def write_results(results_dir: Path, rows: list[dict[str, Any]]) -> tuple[Path, Path]:
    """Commit ``results.json`` and ``results.csv`` in the results folder."""
    json_path, csv_path = results_dir / "results.json", results_dir / "results.csv"
    write_json_atomic(json_path, rows)
    text = csv_text(rows).encode()
    write_atomic(csv_path, lambda handle: handle.write(text))
    return json_path, csv_path


def report_lines(judged: list[tuple[Run, str, list[str]]]) -> list[str]:
    """The console report, by category as upstream prints it: counts, then each run with
    its issues."""
    counts = {c: sum(1 for _, cat, _ in judged if cat == c) for c in CATEGORIES}
    lines = [f"Results Report: {len(judged)} runs, " + ", ".join(
        f"{counts[c]} {c}" for c in CATEGORIES)]
    for category in ("INVALID", "OPEN", "CLOSED"):
        for run, cat, issues in judged:
            if cat != category:
                continue
            lines.append(f"{category:8} {run_id(run)}  ({run.path})")
            lines += [f"           - {issue}" for issue in issues]
    return lines


def reportgen(results_dir: str) -> int:
    """``reports reportgen --results-dir R``'s own part: every run under R judged and
    printed by category, ``R/results.json`` and ``R/results.csv`` written; 0 (upstream's
    reportgen succeeds whatever the categories; ``check`` is the command that fails)."""
    from dliobench.base.errors import InputError
    from dliobench.report.runs import find_run_dirs

    root = Path(results_dir)
    if not root.is_dir():
        raise InputError(f"--results-dir {results_dir} is not a folder; give the folder the "
                         "runs were written to (their --results-dir)")
    runs = registry.load_runs(find_run_dirs([root]))
    judged = categories(runs)
    for line in report_lines(judged):
        print(line)
    json_path, csv_path = write_results(root, [as_dict(run) for run, _, _ in judged])
    print(f"wrote {json_path} and {csv_path}")
    return 0


def validate(results_dir: str, division: str = "closed") -> int:
    """mlpstorage's ``validate`` of a results folder: our ``dliobench check`` of every run
    under it (1 when any check fails)."""
    from dliobench.report.commands import check_runs

    return check_runs([results_dir], division, as_json=False)
