"""The rest of what a DLIO run leaves in its folder, beside ``summary.json``, so that a leaf of
mlpstorage's results layout holds every file MLPerf Storage's submission checker asks for.

mlcommons/storage ``mlpstorage_py/submission_checker/constants.py``
@a815ef8a317e0b05a7cceea26fe0ae1a0eba2c94 (``RUN_``, ``CHECKPOINT_``, ``DATAGEN_REQUIRED_FILES``)
wants in each ``<stamp>/`` leaf: ``<type>_<command>.stdout.log`` and ``.stderr.log`` (the
output mlpstorage captured from DLIO: ``training_run``, ``checkpointing_run``,
``training_datagen``), ``*output.json``, ``*per_epoch_stats.json``, ``*summary.json`` and
``dlio.log``. Their content follows the engine MLPerf Storage v3.0 ran,
mlcommons/DLIO_local_changes ``dlio_benchmark/utils/statscounter.py``
@2a9cf78b8361a936ab15fb54d00d08d6b4daf096 (v3.0.2):

- ``<rank>_output.json`` per rank (``save_data``): per epoch (keys ``"1"``, ``"2"``, ...:
  DLIO counts epochs from 1) ``start``/``end`` and, per block, the per-step ``load`` (the
  wait for the batch), ``proc`` (the whole step) and ``compute`` seconds, and the block's
  ``au`` (percent) and ``throughput`` (this rank's samples/s); then ``host_memory_GB``,
  ``host_cpu_count``, ``hostname``. We run one block per epoch (``block1``); its AU and
  samples/s are this rank's ``metrics.epoch_metrics`` (the same window as the result's).
- ``<rank>_per_epoch_stats.json`` per rank (``start_train``/``end_train``, ``start_block``,
  ``end_save_ckpt``/``end_load_ckpt``): per epoch ``start``, ``end``, ``duration`` (a string,
  ``'%.2f'`` seconds, as DLIO writes it), ``block1`` and the checkpoints taken in the epoch
  (``save_ckpt<i>``); a checkpoint-only run's epoch ``"1"``
  holds ``save_ckpt<i>``/``load_ckpt<i>`` with ``duration`` (float seconds) and
  ``throughput`` (GiB/s: checkpoint size over duration, the figure summary.json averages).
- ``dlio.log`` and the ``.stdout.log``: DLIO's closing ``[METRIC]`` block (``end_run``), its
  figures read from the run's ``summary.json``; the ``.stderr.log``: the run's warnings.

Times are DLIO's ``utcnow()`` form (local time, microseconds). A step's wall-clock time is the
run's start plus the step's offset on the rank's clock; checkpoints' times are placed back to
back from the run's start (result.json keeps their durations, not their clock times).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from dliobench.results import metrics
from dliobench.results.dlio_summary import DLIO_TIME, GIB
from dliobench.results.timeline import Timeline
from dliobench.storage.atomic import write_atomic, write_json_atomic

LOG_NAME = "dlio.log"


def _clock(started: str | None, offset_s: float) -> str | None:
    """DLIO's time string of ``offset_s`` seconds after the ISO time ``started``."""
    try:
        base = dt.datetime.fromisoformat(started or "")
    except ValueError:
        return None
    return (base + dt.timedelta(seconds=offset_s)).astimezone().strftime(DLIO_TIME)


def _hosts(summary: dict[str, Any], host: str | None) -> dict[str, Any]:
    """The per-host keys a rank's output.json ends with (``StatsCounter.__init__``)."""
    memory = summary.get("host_memory_GB") or [None]
    cpus = summary.get("host_cpu_count") or [None]
    return {"host_memory_GB": memory[0], "host_cpu_count": cpus[0], "hostname": host}


def rank_output(result: dict[str, Any], timeline: Timeline,
                summary: dict[str, Any]) -> dict[str, Any]:
    """DLIO's ``<rank>_output.json`` of one rank, from its timeline."""
    m = result["config"]["metric"]
    out: dict[str, Any] = {}
    for epoch, cols in timeline.by_epoch().items():
        span = cols["wait_s"] + cols["compute_s"] + cols["comm_s"] + cols["ckpt_s"]
        figures = metrics.epoch_metrics(cols, int(m["exclude_start_steps"]),
                                        int(m["exclude_end_steps"]))
        first = float(cols["t_start_s"][0]) if cols["step"].size else 0.0
        last = float(cols["t_start_s"][-1] + span[-1]) if cols["step"].size else 0.0
        out[str(epoch + 1)] = {
            "start": _clock(result.get("started_at"), first),
            "load": {"block1": [float(x) for x in cols["wait_s"]]},
            "proc": {"block1": [float(x) for x in span]},
            "throughput": {"block1": float(figures["samples_per_s"] or 0.0)},
            "au": {"block1": 100.0 * float(figures["au"] or 0.0)},
            "compute": {"block1": [float(x) for x in cols["compute_s"]]},
            "end": _clock(result.get("started_at"), last)}
    host = next((r.get("host") for r in result.get("ranks") or []
                 if r.get("rank") == timeline.rank), result["machine"].get("host"))
    return {**out, **_hosts(summary, host)}


def _duration(first: float, last: float) -> str:
    return f"{last - first:.2f}"


def training_stats(result: dict[str, Any], timeline: Timeline) -> dict[str, Any]:
    """DLIO's ``<rank>_per_epoch_stats.json`` of one training rank: each epoch and its one
    block, with start, end and duration."""
    out: dict[str, Any] = {}
    for epoch, cols in timeline.by_epoch().items():
        if not cols["step"].size:
            continue
        span = cols["wait_s"] + cols["compute_s"] + cols["comm_s"] + cols["ckpt_s"]
        first, last = float(cols["t_start_s"][0]), float(cols["t_start_s"][-1] + span[-1])
        times = {"start": _clock(result.get("started_at"), first),
                 "end": _clock(result.get("started_at"), last),
                 "duration": _duration(first, last)}
        out[str(epoch + 1)] = {**times, "block1": dict(times),
                               **_training_checkpoints(result, epoch, cols)}
    return out


def _training_checkpoints(result: dict[str, Any], epoch: int,
                          cols: dict[str, Any]) -> dict[str, Any]:
    """The checkpoints taken during training in ``epoch``, as v3.0's ``end_save_ckpt``
    records them (``save_ckpt<i>``, i the checkpoint's number from 1): clock times from this
    rank's step that took it, the duration and GiB/s of the checkpoint (all ranks' bytes over
    the slowest rank's time, as summary.json's figures)."""
    out: dict[str, Any] = {}
    for row in (result.get("checkpoint") or {}).get("checkpoints") or []:
        if row.get("epoch") != epoch or not row.get("write_s"):
            continue
        at = [i for i, step in enumerate(cols["step"]) if int(step) == int(row["step"])]
        start = (float(cols["t_start_s"][at[0]] + cols["wait_s"][at[0]] + cols["compute_s"][at[0]]
                       + cols["comm_s"][at[0]]) if at else None)
        seconds = float(row["write_s"])
        out[f"save_ckpt{int(row['index']) + 1}"] = {
            "start": None if start is None else _clock(result.get("started_at"), start),
            "end": None if start is None else _clock(result.get("started_at"), start + seconds),
            "duration": seconds, "throughput": int(row["bytes"]) / GIB / seconds}
    return out


def checkpoint_stats(result: dict[str, Any]) -> dict[str, Any]:
    """DLIO's per_epoch_stats of a checkpoint-only run: epoch ``"1"`` with each checkpoint
    written (``save_ckpt<i>``) then read (``load_ckpt<i>``), i counted from 1 in each
    direction, as ``_checkpoint_write``/``_checkpoint_read`` count their blocks."""
    ckpt = result.get("checkpoint") or {}
    started = result.get("started_at")
    at = 0.0
    epoch: dict[str, Any] = {"start": _clock(started, 0.0)}
    for op, name in (("write", "save_ckpt"), ("read", "load_ckpt")):
        for i, row in enumerate((ckpt.get(op) or {}).get("checkpoints") or [], start=1):
            seconds = float(row["duration_s"] or 0.0)
            epoch[f"{name}{i}"] = {
                "start": _clock(started, at), "end": _clock(started, at + seconds),
                "duration": seconds,
                "throughput": int(row["bytes"]) / GIB / seconds if seconds else 0.0}
            at += seconds
    epoch["end"] = _clock(started, at)
    return {"1": epoch}


def metric_block(summary: dict[str, Any]) -> list[str]:
    """DLIO's closing ``[METRIC]`` lines (v3.0's ``end_run``), from summary.json's figures."""
    m = summary.get("metric") or {}
    lines = ["Averaged metric over all steps/epochs",
             "[METRIC] " + "=" * 58,
             f"[METRIC] Number of Simulated Accelerators: {summary.get('num_accelerators')} "]

    def pair(mean: str, std: str) -> str:
        return f"{float(m.get(mean) or 0.0):.4f} ({float(m.get(std) or 0.0):.4f})"

    if "train_au_mean_percentage" in m:
        lines += [
            "[METRIC] Training Accelerator Utilization [AU] (%): "
            + pair("train_au_mean_percentage", "train_au_stdev_percentage"),
            "[METRIC] Training Throughput (samples/second): "
            + pair("train_throughput_mean_samples_per_second",
                   "train_throughput_stdev_samples_per_second"),
            "[METRIC] Training I/O Throughput (MiB/second): "
            + pair("train_io_mean_MB_per_second", "train_io_stdev_MB_per_second"),
            f"[METRIC] train_au_meet_expectation: {m.get('train_au_meet_expectation')}"]
    for name, word in (("save", "save"), ("load", "load")):
        if f"{name}_checkpoint_io_mean_GB_per_second" in m:
            lines += [
                f"[METRIC] Checkpoint {word} duration (seconds): "
                + pair(f"{name}_checkpoint_duration_mean_seconds",
                       f"{name}_checkpoint_duration_stdev_seconds"),
                f"[METRIC] Checkpoint {word} I/O Throughput (GiB/second): "
                + pair(f"{name}_checkpoint_io_mean_GB_per_second",
                       f"{name}_checkpoint_io_stdev_GB_per_second")]
    lines.append("[METRIC] " + "=" * 58)
    return lines


def log_text(summary: dict[str, Any], result: dict[str, Any]) -> str:
    """``dlio.log`` (and the captured stdout): the run's start, result and [METRIC] block."""
    lines = [f"{summary.get('start')} dliobench run {result.get('run_id')} started "
             f"({result.get('ranks_count')} ranks); result.json holds every figure",
             *metric_block(summary),
             f"{summary.get('end')} dliobench run {result.get('run_id')} ended: "
             f"{result.get('status')}"]
    return "\n".join(lines) + "\n"


def _text(path: Path, text: str) -> None:
    data = text.encode()
    write_atomic(path, lambda handle: handle.write(data))


def write_logs(run_dir: Path, stem: str, text: str, warnings: list[str]) -> None:
    """``dlio.log``, ``<stem>.stdout.log`` (both ``text``) and ``<stem>.stderr.log`` (the
    warnings, one a line)."""
    _text(run_dir / LOG_NAME, text)
    _text(run_dir / f"{stem}.stdout.log", text)
    _text(run_dir / f"{stem}.stderr.log", "".join(f"{w}\n" for w in warnings))


def write_run_outputs(run_dir: Path, result: dict[str, Any], summary: dict[str, Any],
                      timelines: list[Timeline], benchmark_type: str) -> None:
    """Every file of a complete run's leaf the submission checker asks for, but summary.json
    and the ``dlio_config`` record (written before): see the module's docstring."""
    if benchmark_type == "checkpointing":
        write_json_atomic(run_dir / "0_output.json", _hosts(summary, summary.get("hostname")),
                          indent=4)
        write_json_atomic(run_dir / "0_per_epoch_stats.json", checkpoint_stats(result), indent=4)
    else:
        for timeline in timelines:
            rank = timeline.rank
            write_json_atomic(run_dir / f"{rank}_output.json",
                              rank_output(result, timeline, summary), indent=4)
            write_json_atomic(run_dir / f"{rank}_per_epoch_stats.json",
                              training_stats(result, timeline), indent=4)
    write_logs(run_dir, f"{benchmark_type}_run", log_text(summary, result),
               [str(w) for w in result.get("warnings") or []])


def write_datagen_outputs(run_dir: Path, summary: dict[str, Any]) -> None:
    """A datagen leaf's files (DATAGEN_REQUIRED_FILES): summary.json as DLIO's generate-only
    run fills it, output.json's host keys, an empty per_epoch_stats.json, the logs."""
    write_json_atomic(run_dir / "summary.json", summary, indent=4)
    write_json_atomic(run_dir / "0_output.json", _hosts(summary, summary.get("hostname")),
                      indent=4)
    write_json_atomic(run_dir / "0_per_epoch_stats.json", {}, indent=4)
    text = (f"{summary.get('start')} dliobench generate: {summary.get('num_files_train')} "
            f"files written or found\n{summary.get('end')} generation done\n")
    write_logs(run_dir, "training_datagen", text, [])

