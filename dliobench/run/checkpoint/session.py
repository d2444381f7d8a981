"""A checkpoint-only run end to end (``workflow.train: false``, ``workflow.checkpoint: true``):
write and read the checkpoints on every rank, then rank 0 writes the result."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from pathlib import Path
from typing import Any

from dliobench.base.errors import DlioBenchError
from dliobench.comm.watchdog import Watchdog
from dliobench.comm.world import Comm, World
from dliobench.config.schema import Config
from dliobench.results import ckpt_summary, sysinfo
from dliobench.results.assemble import build_result
from dliobench.results.files import RESULT_NAME, open_run_folder, write_partial_result
from dliobench.results.measured import RankTrace
from dliobench.results.timeline import Timeline
from dliobench.run.checkpoint.layout import Layout, layout_for
from dliobench.run.checkpoint.run import CheckpointRun, run_checkpoints
from dliobench.run.facts import run_facts
from dliobench.storage import backend_for

log = logging.getLogger(__name__)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def layout_summary(config: Config, layout: Layout, launched: int) -> dict[str, Any]:
    """The checkpoint's layout and sizes: the full checkpoint and what this run writes."""
    full = Layout(layout.model, layout.tp, layout.pp, layout.dp, layout.zero,
                  layout.model_dtype, layout.optimizer_dtype)
    model, optimizer = full.totals()
    subset = config.checkpoint.mode == "subset"
    ranks = range(launched) if subset else range(layout.world)
    s_model, s_optimizer = layout.totals(ranks)
    s_full = sum(full.totals(ranks))
    return {"tensor_parallelism": layout.tp, "pipeline_parallelism": layout.pp,
            "data_parallelism": layout.dp, "zero_stage": layout.zero,
            "layout_ranks": layout.world, "launched_ranks": launched,
            "mode": config.checkpoint.mode, "parameters": layout.model.num_parameters(),
            "model_bytes": model, "optimizer_bytes": optimizer,
            "checkpoint_bytes": model + optimizer,
            "share_of_checkpoint": s_full / (model + optimizer),
            "rules_share": launched / layout.world if subset else 1.0,
            "scale": layout.scale,
            "planned_bytes": s_model + s_optimizer,
            "planned_model_bytes": s_model, "planned_optimizer_bytes": s_optimizer}


def run(config: Config, world: World, comm: Comm, warnings: list[str],
        save: Any) -> tuple[Path | None, Any, str | None]:
    """Run the checkpoints; rank 0 returns (run folder, result, problem), others Nones.
    ``save`` commits the result files (``session.save``)."""
    run_id, run_dir = open_run_folder(config, world, comm)
    started = _now()
    trace = RankTrace(world.rank, world.host, Timeline(world.rank))
    done = CheckpointRun(trace.checkpoint_ops)
    watchdog = Watchdog(config.train.stall_timeout_s, world, comm)
    extra = {"warnings": warnings, "launcher": world.launcher}
    try:
        run_checkpoints(config, world, comm, watchdog, done)
    except BaseException as exc:
        trace.error = str(exc) or type(exc).__name__
        if trace.checkpoint_ops:  # what this rank measured, as a partial result
            partial = _result(config, run_id, "partial", [trace], [done], started,
                              {**extra, "ranks_launched": world.size}, world.size)
            _say_where(exc, world, _write_partial(run_dir, partial, trace, config, world, save))
        elif world.is_root:  # nothing measured: no empty run folder is left
            with contextlib.suppress(OSError):
                run_dir.rmdir()
        raise
    finally:
        watchdog.stop()
    traces = comm.gather(trace)
    runs = comm.gather(done)
    if not world.is_root or traces is None or runs is None:
        return None, None, None
    result = _result(config, run_id, "complete", traces, runs, started, extra, world.size)
    where, problem = save(run_dir, result, [t.timeline for t in traces], config)
    return where, result, problem


def _write_partial(run_dir: Path, result: Any, trace: RankTrace, config: Config,
                   world: World, save: Any) -> Path:
    """Commit what this rank measured before the run failed and return where it went:
    beside the other ranks' (``write_partial_result``), or where ``save`` puts results when
    the output folder cannot take them (a full disk, said in a warning)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        return write_partial_result(run_dir, result, world.rank)
    except (DlioBenchError, OSError):
        folder, problem = save(run_dir, result, [trace.timeline], config)
        if problem:
            log.warning("%s", problem)
        return Path(folder) / RESULT_NAME


def _say_where(exc: BaseException, world: World, where: Path) -> None:
    """Tell where the partial result is: in the error's own sentence when it is one of ours
    (the user reads one line), else in a warning before the error."""
    said = f"what rank {world.rank} measured before it is in {where} (status: partial)"
    if isinstance(exc, DlioBenchError) and len(exc.args) == 1:
        exc.args = (f"{exc.args[0]}; {said}",)
    else:
        log.warning("the run ended early; %s", said)


def _result(config: Config, run_id: str, status: str, traces: list[RankTrace],
            runs: list[CheckpointRun], started: str, extra: dict[str, Any],
            launched: int) -> Any:
    """The result document of a checkpoint-only run."""
    result = build_result(config, run_id, status, traces, started, _now(), 0, extra,
                          run_facts(config))
    result["storage"] = backend_for(config.checkpoint.checkpoint_folder, config.storage,
                                    "checkpoint.checkpoint_folder").facts()
    result["checkpoint"] = summary(config, traces, runs, launched)
    result["verdict"] = {**result["verdict"], "meets_floor": None, "limiter": "not applicable",
                         "reason": "a checkpoint-only run: no training, no AU floor"}
    note = ckpt_summary.warning(result["checkpoint"]["read_honesty"])
    if note:
        result["warnings"] = [*result.get("warnings", []), note]
    return result


def summary(config: Config, traces: list[RankTrace], runs: list[CheckpointRun],
            launched: int) -> dict[str, Any]:
    """``result.json``'s ``checkpoint`` of a checkpoint-only run."""
    layout = layout_for(config, launched)
    hosts = len({t.host for t in traces})
    write = ckpt_summary.op_summary(traces, "write")
    read = ckpt_summary.op_summary(traces, "read")
    written = write["bytes"] if write else 0
    honesty = ckpt_summary.read_honesty(all(r.evicted for r in runs), written,
                                        sysinfo.host_memory_bytes(), hosts,
                                        read["count"] if read else 0)
    return {"workflow": "checkpoint-only", "file_format": runs[0].file_format,
            "fsync": config.checkpoint.fsync,
            "layout": layout_summary(config, layout, launched),
            "files_per_checkpoint": sum(r.files_per_checkpoint for r in runs),
            "write": write, "read": read, "read_honesty": honesty}
