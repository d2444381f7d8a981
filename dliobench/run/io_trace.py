"""The run's side of I/O tracing: the plan's backend wrapped to trace every data read
(``output.trace_io``, ``run --trace-io``) into ``<run-dir>/io-trace/`` and/or to issue a
traced job's read requests (``reader.read_requests``). Without either the plan is returned
as it is, so an untraced run pays nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dliobench.dataset.plan import Plan
from dliobench.storage.traced import traced

FOLDER = "io-trace"


def traced_plan(plan: Plan, run_dir: Path) -> Plan:
    """``plan`` reading through the tracing backend when its configuration asks for it."""
    cfg = plan.config
    folder = str(run_dir / FOLDER) if cfg.output.trace_io else ""
    backend = traced(plan.backend, folder, cfg.reader.read_requests)
    return plan if backend is plan.backend else replace(plan, backend=backend)


def finish(plan: Plan) -> None:
    """Write what this process's trace still holds (a run in a process that goes on, as a
    test's in-process CLI, would otherwise leave it to the process's exit)."""
    writer = getattr(plan.backend, "writer", None)
    if writer is not None:
        writer.flush()
