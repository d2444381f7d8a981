"""The report's first section: per workload, what the storage sustained (AU against its floor,
accelerators where a find-max sweep found them), what limited it, and the evidence.

Nothing is judged again here: the verdicts are the runs' own (``result.json``'s ``verdict``,
as their consoles said them) and every figure is printed as the runs table prints it
(``cells.row_text``), so the first screen and the tables cannot disagree.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dliobench.report import cells
from dliobench.report.labels import plural
from dliobench.report.runs import Run, RunSet
from dliobench.results import figures
from dliobench.results.verdict import verdict_words


@dataclass(frozen=True)
class Answer:
    """One workload's answer: what the storage sustained, what limited it, the evidence."""

    workload: str
    about: str
    sustained: str
    limited: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class _Row:
    """A run with its row of the runs table."""

    run: Run
    row: pd.Series

    def text(self, column: str) -> str:
        return cells.row_text(self.row, column)

    @property
    def verdict(self) -> dict[str, Any]:
        return dict(self.run.result.get("verdict") or {})

    @property
    def name(self) -> str:
        return str(self.row["label"])


def _wait_share(run: Run) -> str:
    """The share of the counted wall time the ranks waited for data."""
    shares = run.result.get("time_shares") or {}
    wait = shares.get("wait") if isinstance(shares, dict) else None
    return "n/a" if wait is None else f"{100 * wait:.1f} %"


def _evidence(r: _Row) -> str:
    """A training run's figures and its verdict's own reason."""
    storage = r.text("reads_from_storage") or "no reads measured"
    reason = r.verdict.get("reason")
    return (f"{r.name}: read {r.text('mb_per_s')}, {r.text('samples_per_s')}, wait p99 "
            f"{r.text('wait_p99_ms')}, waiting {_wait_share(r.run)} of the time; reads from "
            f"storage: {storage}" + (f"; verdict: {reason}" if reason else ""))


def find_max(runs: list[Run]) -> dict[str, Any] | None:
    """The answer of a find-max sweep that ran one of these runs as a probe (``sweep.json``'s
    ``search``, in the sweep folder above the probe's, as ``dliobench sweep
    --find-max-accelerators`` writes it), or None."""
    for run in runs:
        for folder in (run.path.parent, run.path.parent.parent):
            try:
                doc = json.loads((folder / "sweep.json").read_text())
            except (OSError, ValueError):
                continue
            search = doc.get("search") if isinstance(doc, dict) else None
            probes = {str(Path(str(p.get("run_dir"))).resolve()) for p in doc.get("points") or []
                      if isinstance(p, dict) and p.get("run_dir")}
            if isinstance(search, dict) and str(run.path.resolve()) in probes:
                return search
    return None


def _search_text(search: dict[str, Any], accelerator: str) -> str:
    """A find-max sweep's answer in words."""
    best, fail, err = search.get("best"), search.get("first_failure"), search.get("error")
    said = (f"a find-max sweep found {best} × {search.get('accelerator') or accelerator} "
            "sustained at the AU floor")
    if search.get("cap_reached"):
        said += f" (at least: its cap, --max-accelerators {search.get('max')}, was reached)"
    if isinstance(fail, dict):
        said += f"; at {fail.get('ranks')}: {fail.get('limiter')}-limited ({fail.get('reason')})"
    if isinstance(err, dict):
        said += f"; the search stopped at {err.get('ranks')}: {err.get('reason')}"
    alone = search.get("storage_alone")
    if isinstance(alone, dict) and alone.get("bytes_per_s") is not None:
        said += (f"; the storage alone (compute 0, {plural(alone.get('ranks'), 'rank')}) read "
                 f"{cells.text('mb_per_s', float(alone['bytes_per_s']) / 1e6)}")
    return said


def _training(rows: list[_Row], search: dict[str, Any] | None) -> tuple[str, str, list[str]]:
    """Sustained, limited by, evidence of a workload's training runs."""
    judged = [r for r in rows if r.verdict.get("meets_floor") is not None]
    if not judged:  # no floor to judge against: the rates are the answer
        top = max(rows, key=lambda r: np.nan_to_num(float(r.row["mb_per_s"] or 0)))
        idle = all(cells.idle(r.row) for r in rows)
        how = ("with no compute emulated: storage and client alone, no AU floor" if idle else
               "with no AU measured")
        why = ("without emulated compute a run has no AU floor" if idle else
               "no run measured an AU (too few steps counted, or it ended early)")
        return (f"read {top.text('mb_per_s')} ({top.text('samples_per_s')}) at "
                f"{plural(top.run.ranks, 'rank')} {how} ({top.name})", f"not judged: {why}",
                [_evidence(top)])
    meets = [r for r in judged if r.verdict.get("meets_floor")]
    accel = judged[0].run.emulated.label
    if meets:
        top = max(meets, key=lambda r: (r.run.ranks, float(r.row["au"])))
        sustained = (f"{top.run.ranks} × {accel} at AU {top.text('au')} against "
                     f"its {top.text('au_floor')} floor ({top.name}); {len(meets)} of "
                     f"{len(judged)} run(s) meet the floor")
    else:
        top = max(judged, key=lambda r: float(r.row["au"]) if r.row["au"] == r.row["au"] else -1)
        sustained = (f"no run met its {top.text('au_floor')} floor; the best: AU "
                     f"{top.text('au')} at {top.run.ranks} × {accel} ({top.name})")
    if search is not None:
        sustained = f"{_search_text(search, accel)}. Runs: {sustained}"
    below = [r for r in judged if not r.verdict.get("meets_floor")]
    evidence = [_evidence(top)]
    if not below:
        return sustained, "nothing in these runs: each met its AU floor", evidence
    words = Counter(verdict_words(r.verdict) for r in below)
    first = min(below, key=lambda r: r.run.ranks)
    limited = (", ".join(f"{w} ({plural(n, 'run')})" for w, n in words.most_common()) +
               f"; the fewest accelerators below the floor: {first.run.ranks} ({first.name})")
    return sustained, limited, [*evidence, _evidence(first)]


def _checkpoints(rows: list[_Row]) -> tuple[str, str, list[str]]:
    """Sustained, limited by, evidence of a workload's checkpoint-only runs."""
    top = max(rows, key=lambda r: np.nan_to_num(float(r.row.get("ckpt_write_gb_per_s") or 0)))
    sustained = (f"checkpoint write {top.text('ckpt_write_gb_per_s')}, read "
                 f"{top.text('ckpt_read_gb_per_s')} ({top.name}"
                 + (f"; the fastest write of {len(rows)} runs)" if len(rows) > 1 else ")"))
    storage = top.text("reads_from_storage") or "no reads"
    return (sustained, "not judged: a checkpoint-only run has no AU floor; the GB/s are the "
            "answer", [f"{top.name}: reads from storage: {storage}"])


def _kvcache(rows: list[_Row]) -> tuple[str, str, list[str]]:
    """Sustained, limited by, evidence of a workload's KV-cache runs: the figures of the
    table of figures (``results.figures``, as their consoles printed them) and each run's
    verdict."""
    top = max(rows, key=lambda r: figures.figure("kv_tokens_per_s").value(r.run.result) or 0)
    shown = ", ".join(f"{f.label} {f.text(top.run.result)}" for f in figures.KVCACHE)
    more = f"; the most tokens/s of {len(rows)} runs" if len(rows) > 1 else ""
    return (f"{shown} ({top.name}{more})",
            "; ".join(f"{r.name}: {r.verdict.get('reason') or 'no verdict'}" for r in rows),
            [f"{top.name}: reads from storage: {top.text('reads_from_storage') or 'no reads'}"])


def _vectordb(rows: list[_Row]) -> tuple[str, str, list[str]]:
    """Sustained, limited by, evidence of a workload's vector-database runs: the figures of
    the table of figures of its fastest valid run (recall at or above its floor), and each
    run's verdict."""
    valid = [r for r in rows if (r.run.result.get("vectordb") or {}).get("valid")] or rows
    top = max(valid, key=lambda r: figures.figure("vdb_qps").value(r.run.result) or 0)
    shown = ", ".join(f"{f.label} {f.text(top.run.result).strip()}" for f in figures.VECTORDB)
    invalid = len(rows) - sum((r.run.result.get("vectordb") or {}).get("valid", False)
                              for r in rows)
    more = (f"; the most queries/s of {len(rows)} runs" if len(rows) > 1 else "") + (
        f"; {invalid} below their recall floor (invalid)" if invalid else "")
    return (f"{shown} ({top.name}{more})",
            "; ".join(f"{r.name}: {r.run.result['vectordb']['verdict']['limiter']}: "
                      f"{r.run.result['vectordb']['verdict']['reason']}" for r in rows),
            [f"{top.name}: reads from storage: {top.text('reads_from_storage') or 'no reads'}"])


def answers(rs: RunSet) -> list[Answer]:
    """Per workload, in the order the runs came: its answer."""
    rows = [_Row(run, row) for run, (_, row) in zip(rs.runs, rs.table.iterrows(), strict=True)]
    out = []
    for workload in dict.fromkeys(str(r.row["workload"]) for r in rows):
        mine = [r for r in rows if str(r.row["workload"]) == workload]
        kv = [r for r in mine if r.run.result.get("kvcache") is not None]
        vdb = [r for r in mine if r.run.result.get("vectordb") is not None]
        ckpt = [r for r in mine if r not in kv and (r.run.result.get("checkpoint") or {}).get(
            "workflow") == "checkpoint-only"]
        trained = [r for r in mine if r not in kv and r not in ckpt and r not in vdb]
        parts = []
        if trained:
            parts.append(_training(trained, find_max([r.run for r in trained])))
        if ckpt:
            parts.append(_checkpoints(ckpt))
        if kv:
            parts.append(_kvcache(kv))
        if vdb:
            parts.append(_vectordb(vdb))
        accelerators = sorted({r.run.emulated.label for r in trained})  # training's only
        about = "; ".join(p for p in (", ".join(accelerators), plural(len(mine), "run")) if p)
        out.append(Answer(workload, about, " / ".join(p[0] for p in parts),
                          " / ".join(p[1] for p in parts),
                          tuple(e for p in parts for e in p[2])))
    return out


def answers_html(rs: RunSet) -> str:
    """The first section of the page."""
    blocks = []
    for a in answers(rs):
        evidence = "".join(f"<li>{html.escape(e)}</li>" for e in a.evidence)
        blocks.append(
            f'<div class="answer" data-workload="{html.escape(a.workload)}">'
            f'<h3>{html.escape(a.workload)} <span class="meta">{html.escape(a.about)}</span>'
            f"</h3><dl><dt>sustained</dt><dd>{html.escape(a.sustained)}</dd>"
            f"<dt>limited by</dt><dd>{html.escape(a.limited)}</dd>"
            f"<dt>evidence</dt><dd><ul>{evidence}</ul></dd></dl></div>")
    return ('<section id="answers"><h2>What the storage sustained</h2>'
            '<p class="meta">Per workload: the most accelerators a run sustained at its AU '
            "floor (a find-max sweep's answer where one ran), what held the others below it "
            "(each run's own verdict), and the figures behind both, as the tables below print "
            f"them.</p>{''.join(blocks)}</section>")
