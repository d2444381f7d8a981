"""Run sets: the runs MLPerf Storage scores together, run by one ``dliobench run --repeat N``
(or ``--run-set``, the set the rules ask) and described by one set document.

Training (Rules.md §2.1.17, Submission_guidelines.md §6.6): a warm-up run, not scored, then
N scored runs (the rules: 5) of one configuration on one dataset, generated once by the
first run; each run its own shuffle seed (§6.6.3: ``train.seed`` plus the run's place).
Checkpointing (Rules.md §4.6.3, §4.7.1): 10 writes then 10 reads, in one combined invocation
or split in two, a write-only invocation (its checkpoints kept) then a read-only one that
must start within 30 s of the write set's end; the read invocation times that gap from its
process's start. Vector database (Submission_guidelines.md, Definitions): N runs on one index,
no warm-up (``dliobench vectordb run --loops N``).

Every rank runs the set in step (each run joins the job as a single run does); rank 0 stamps
each result.json with its place in the set (``run_set``) and rewrites the set document
(``runset-<set id>.json`` beside the run folders) after every run, so a set stopped part way
(Ctrl-C, SIGTERM, a failing run) keeps its finished runs valid and says how far it got.
Judging the set is ``report.rules`` (``dliobench check``, and the summary after the set).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import mean, stdev
from typing import Any

from dliobench.base.errors import ConfigError, DlioBenchError, Terminated
from dliobench.config.schema import Config
from dliobench.results.files import write_json, write_result

log = logging.getLogger(__name__)

RULE_SCORED_RUNS = 5  # Submission_guidelines.md §6.6.1: "a warm-up run before the 5 test runs"
SPLIT_GAP_S = 30.0  # Rules.md §4.7.1 checkpointCacheFlushValidation
SET_GLOB = "runset-*.json"
SET_SCHEMA = "dliobench-runset/1"


@dataclass(frozen=True)
class SetAsked:
    """What the command line asked of the set: ``--repeat N`` scored runs, or ``--run-set``
    (the count the rules ask)."""

    repeat: int | None
    rules: bool


@dataclass(frozen=True)
class SetPlan:
    """The runs of a set: their family, the phase (training; checkpointing's ``write+read``,
    ``write`` or ``read``), how many in all, and whether the first is the warm-up."""

    family: str
    phase: str
    runs: int
    warmup: bool

    def place(self, set_id: str, index: int) -> dict[str, Any]:
        """``result.json``'s ``run_set`` of the run at ``index``."""
        return {"set_id": set_id, "index": index, "count": self.runs,
                "warmup": self.warmup and index == 0, "phase": self.phase}


def plan(config: Config, asked: SetAsked) -> tuple[SetPlan, Config]:
    """The set the configuration and options ask for, and the configuration its runs share
    (a write phase keeps its checkpoints for the read invocation); one sentence when it
    cannot be run."""
    if config.workflow.checkpoint_only:
        return _checkpoint_plan(config, asked)
    if config.workflow.vectordb:  # 5 runs on one index (Submission_guidelines.md, Definitions)
        return SetPlan("vectordb", "queries", asked.repeat or RULE_SCORED_RUNS, False), config
    if not config.workflow.train:
        raise ConfigError("workflow.train is false, so a run trains nothing and there is no "
                          "run to repeat; drop --repeat/--run-set or set workflow.train=true")
    scored = asked.repeat or RULE_SCORED_RUNS
    return SetPlan("training", "training", scored + 1, True), config


def _checkpoint_plan(config: Config, asked: SetAsked) -> tuple[SetPlan, Config]:
    """Checkpointing: combined runs, or one invocation of the split form (§4.7.1)."""
    cfg = config.checkpoint
    writes, reads = max(0, cfg.num_checkpoints_write), max(0, cfg.num_checkpoints_read)
    if not (writes or reads):
        raise ConfigError("checkpoint.num_checkpoints_write and num_checkpoints_read are both "
                          "0, so the set would do nothing; the rules ask for 10 of each")
    phase = "write+read" if writes and reads else "write" if writes else "read"
    if phase != "write+read" and (asked.repeat or 1) > 1:
        raise ConfigError(f"--repeat {asked.repeat} with a {phase}-only checkpoint run: the "
                          "split form is one write-only invocation then one read-only "
                          "invocation (Rules.md §4.7.1); drop --repeat, or give both "
                          "checkpoint counts to repeat combined runs")
    if phase == "write" and not cfg.keep:
        config = replace(config, checkpoint=replace(cfg, keep=True))
        log.info("the write phase of a split checkpoint set keeps its checkpoints for the "
                 "read invocation (checkpoint.keep=true)")
    return SetPlan("checkpointing", phase, asked.repeat or 1, False), config


def run_config(config: Config, set_plan: SetPlan, index: int) -> Config:
    """The configuration of run ``index``: training runs each shuffle with their own seed
    (Submission_guidelines.md §6.6.3); checkpoint runs are alike."""
    if set_plan.family != "training":
        return config
    return replace(config, train=replace(config.train, seed=config.train.seed + index))


def process_started() -> float:
    """When this process started (epoch seconds), from the kernel: the split form's gap is
    timed from the read invocation's start (Rules.md §4.7.1), not from when this code ran;
    ``time.time()`` where /proc cannot tell."""
    try:
        stat = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - int(stat[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="milliseconds")


def find_write_set(config: Config) -> dict[str, Any] | None:
    """The latest complete write-phase set of this workload and checkpoint folder in
    ``output.folder`` (its set document), or None."""
    best: dict[str, Any] | None = None
    root = Path(config.output.folder)
    for path in root.rglob(SET_GLOB) if root.is_dir() else ():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (isinstance(doc, dict) and doc.get("phase") == "write"
                and doc.get("state") == "complete" and doc.get("workload") == config.name
                and doc.get("checkpoint_folder") == config.checkpoint.checkpoint_folder
                and (best is None or str(doc.get("ended_at")) > str(best.get("ended_at")))):
            best = {**doc, "document": str(path)}
    return best


def split_gap(config: Config, started: float, entered: float) -> dict[str, Any]:
    """The read invocation's place after its write set: the gap from the write set's end to
    this process's start (or, for a process older than the write set, one that ran it in
    Python, to this command's start), and the 30 s the rules allow."""
    write = find_write_set(config)
    out: dict[str, Any] = {"read_invocation_started_at": _iso(started), "limit_s": SPLIT_GAP_S,
                           "write_set_id": None, "write_ended_at": None, "gap_s": None}
    if write is None:
        return out
    ended = dt.datetime.fromisoformat(str(write["ended_at"])).timestamp()
    timed_from = "process start"
    if started < ended <= entered:
        started, timed_from = entered, "command start"
    folder = Path(write["document"]).resolve().parent
    return {**out, "read_invocation_started_at": _iso(started), "timed_from": timed_from,
            "write_set_id": write.get("set_id"), "write_ended_at": write["ended_at"],
            "gap_s": round(started - ended, 3),
            "write_runs": [str(folder / r["folder"]) for r in write.get("runs", [])]}


def new_set_id(workload: str) -> str:
    """``YYYYmmdd-HHMMSS-<workload>-set-<6 hex>``."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in workload) or "run"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-set-{secrets.token_hex(3)}"


@dataclass
class SetDoc:
    """The set document rank 0 keeps and rewrites after every run."""

    config: Config
    set_plan: SetPlan
    set_id: str
    started: float
    folder: Path
    runs: list[dict[str, Any]] = field(default_factory=list)
    split: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        """Where the document goes: beside the run folders."""
        return self.folder / f"runset-{self.set_id}.json"

    def add(self, index: int, run_dir: Path, result: dict[str, Any], ended: float) -> None:
        """Record a finished run; the first one places the document beside its folder."""
        if not self.runs:
            self.folder = run_dir.parent
        m = result.get("metrics", {})
        row = {"index": index, "warmup": self.set_plan.warmup and index == 0,
               "run_id": result.get("run_id"), "folder": os.path.relpath(run_dir, self.folder),
               "status": result.get("status"), "au": m.get("au"),
               "samples_per_s": m.get("samples_per_s"),
               "meets_floor": (result.get("verdict") or {}).get("meets_floor"),
               "started_at": result.get("started_at"),
               "ended_at": _iso(ended)}
        ckpt = result.get("checkpoint") or {}
        for op in ("write", "read"):
            if isinstance(ckpt.get(op), dict):
                row[f"checkpoint_{op}s"] = ckpt[op].get("count")
                row[f"checkpoint_{op}_bytes_per_s"] = ckpt[op].get("aggregate_bytes_per_s")
        vdb = result.get("vectordb") or {}
        if vdb:
            row.update({"qps": vdb.get("qps"), "recall": vdb.get("recall"),
                        "valid": vdb.get("valid")})
        self.runs.append(row)

    def write(self, state: str, stopped_by: str | None = None) -> Path:
        """Commit the document (``state``: running, complete, interrupted or failed)."""
        doc = {"schema": SET_SCHEMA, "set_id": self.set_id, "family": self.set_plan.family,
               "phase": self.set_plan.phase, "workload": self.config.name,
               "checkpoint_folder": self.config.checkpoint.checkpoint_folder,
               "planned": self.set_plan.runs, "finished": len(self.runs), "state": state,
               "stopped_by": stopped_by, "warmup": self.set_plan.warmup,
               "invocation_started_at": _iso(self.started),
               "ended_at": self.runs[-1]["ended_at"] if self.runs else None,
               "runs": self.runs, "scored": scored_figures(self.runs), "split": self.split}
        write_json(self.path, doc)
        return self.path


def scored_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and standard deviation of the scored (not warm-up) complete runs' AU and
    samples/s (None where fewer than two runs measured it)."""
    rows = [r for r in runs if not r["warmup"] and r["status"] == "complete"]
    out: dict[str, Any] = {"count": len(rows)}
    for key in ("au", "samples_per_s"):
        values = [float(r[key]) for r in rows if isinstance(r.get(key), int | float)]
        out[f"{key}_mean"] = mean(values) if values else None
        out[f"{key}_stdev"] = stdev(values) if len(values) > 1 else None
    return out


@dataclass(frozen=True)
class SetOutcome:
    """Rank 0: the set document and its plan; other ranks: Nones."""

    document: Path | None
    set_plan: SetPlan | None


RunOne = Callable[[Config], Any]  # one run on every rank: a run.session.RunOutcome


def run_set(config: Config, asked: SetAsked, is_root: bool, run_one: RunOne,
            on_run: Callable[[Any], object], say: Callable[[str], None]) -> SetOutcome:
    """Run the set on every rank, in step; rank 0 stamps each result and keeps the set
    document. ``on_run`` shows each run as it ends; ``say`` tells the user (rank 0)."""
    started, entered = process_started(), time.time()
    set_plan, config = plan(config, asked)
    doc = SetDoc(config, set_plan, new_set_id(config.name), started, Path(config.output.folder))
    if is_root and set_plan.phase == "read":
        doc.split = split_gap(config, started, entered)
    try:
        for index in range(set_plan.runs):
            if is_root:
                warm = " (the warm-up, not scored)" if set_plan.warmup and not index else ""
                say(f"run set {doc.set_id}: run {index + 1} of {set_plan.runs}{warm}")
            outcome = run_one(run_config(config, set_plan, index))
            if is_root:
                _stamp(doc, index, outcome)
            on_run(outcome)
    except BaseException as exc:
        if is_root:
            _stopped(doc, exc)
        raise
    return SetOutcome(doc.write("complete"), set_plan) if is_root else SetOutcome(None, None)


def _stamp(doc: SetDoc, index: int, outcome: Any) -> None:
    """Rank 0, after run ``index``: its result.json carries its place in the set, and the set
    document records it."""
    if outcome.run_dir is None or outcome.result is None:
        return
    place = doc.set_plan.place(doc.set_id, index)
    if doc.split is not None:
        place["split"] = doc.split
    outcome.result["run_set"] = place
    write_result(outcome.run_dir, outcome.result)
    doc.add(index, outcome.run_dir, outcome.result, time.time())
    doc.write("running")


def _stopped(doc: SetDoc, exc: BaseException) -> None:
    """The set stopped part way: the document says how far it got and why (the finished
    runs stay as they are); an error writing it must not hide the one that stopped the set."""
    interrupted = isinstance(exc, KeyboardInterrupt | Terminated)
    why = str(exc) or ("interrupted" if isinstance(exc, KeyboardInterrupt) else
                       type(exc).__name__)
    try:
        where = doc.write("interrupted" if interrupted else "failed", why)
    except (DlioBenchError, OSError) as problem:  # the set's own error is the one to raise
        log.warning("the run set's document could not be written (%s)", problem)
        return
    log.warning("the run set stopped after %d of %d runs (%s); %s says so",
                len(doc.runs), doc.set_plan.runs, why, where)
