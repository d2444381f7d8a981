"""Findings for people (what was judged, a summary, what to change; the table of every
finding under ``--details``) and for scripts (JSON).

The summary comes first: whether the runs are ready for the division, and one line per thing
to change, each naming the key and the value the rules need. Nothing is cut short.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dliobench.report.rules.finding import DOCUMENTS, FAIL, NOT_APPLICABLE, PASS, Finding, failed
from dliobench.report.rules.registry import Selection

COLOURS = {PASS: "green", FAIL: "red"}


def ready(findings: list[Finding]) -> bool | None:
    """True when every finding passed, False when one failed, None when none failed but some
    could not be applied (so readiness is not shown)."""
    if failed(findings):
        return False
    return None if any(f.status == NOT_APPLICABLE for f in findings) else True


def checklist(findings: list[Finding]) -> list[dict[str, Any]]:
    """What to change, one entry per (check, key, needed value, value had), with the subjects
    it applies to; a failing finding with no key to name gives its sentence instead."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for f in findings:
        if f.status != FAIL:
            continue
        lines = ([(f.check, x.key, x.need, x.have) for x in f.fixes] or
                 [(f.check, "", f.sentence, "")])
        for check, key, need, have in lines:
            entry = out.setdefault((check, key, need, have), {
                "check": check, "key": key, "need": need, "have": have, "subjects": []})
            entry["subjects"].append(f.subject)
    return list(out.values())


def _line(entry: dict[str, Any]) -> str:
    """One checklist entry as a line of text."""
    subjects = entry["subjects"]
    whom = subjects[0] if len(subjects) == 1 else f"{len(subjects)} runs"
    what = (f"{entry['key']}: {entry['need']} (has {entry['have']})" if entry["key"] else
            f"{entry['check']}: {entry['need']}")
    return f"  - {what}  [{entry['check']}; {whom}]"


def summary_lines(findings: list[Finding], division: str) -> list[str]:
    """The summary: ready or not, then the checklist."""
    state = ready(findings)
    bad = failed(findings)
    na = [f.check for f in findings if f.status == NOT_APPLICABLE]
    head = (f"{division.upper()}-ready: yes (all {len(findings)} findings pass)" if state else
            f"{division.upper()}-ready: no ({bad} of {len(findings)} findings fail)"
            if state is False else
            f"{division.upper()}-ready: not known ({len(na)} check(s) could not be applied: "
            f"{', '.join(sorted(set(na)))})")
    entries = checklist(findings)
    if not entries:
        return [head]
    return [head, "What to change (key: value the rules need):",
            *(_line(e) for e in entries)]


def heading(division: str, chosen: Selection) -> str:
    """What was judged, by family of rules: ``MLPerf Storage v3.0 rules, CLOSED division:
    checkpointing rules for 2 run(s)``."""
    families = "; ".join(f"{kind} rules for {n} run(s)" for kind, n in chosen.families().items())
    return f"MLPerf Storage v3.0 rules, {division.upper()} division: {families}"


def skipped_line(chosen: Selection) -> str | None:
    """The runs found below a folder and left out, each with its workload, or None."""
    if not chosen.skipped:
        return None
    listed = ", ".join(f"{r.run_id} ({r.workload or 'unnamed'})" for r in chosen.skipped)
    return (f"Skipped {len(chosen.skipped)} run(s) in no run set, of a workload no MLPerf "
            f"Storage rule defines: {listed}; name a run's folder to check it")


def print_text(findings: list[Finding], division: str, chosen: Selection, details: bool,
               console: Console | None = None) -> None:
    """What was judged and skipped, the summary, a one-line total; with ``details``, every
    finding (status, check, subject, sentence, rule) and the documents cited."""
    console = console or Console()

    def say(text: str) -> None:
        console.print(escape(text), soft_wrap=True, highlight=False)

    say(heading(division, chosen))
    skipped = skipped_line(chosen)
    if skipped:
        say(skipped)
    for line in summary_lines(findings, division):
        say(line)
    if details:
        _details(findings, console)
    passed = sum(f.status == PASS for f in findings)
    na = len(findings) - failed(findings) - passed
    state = ready(findings)
    verdict = ("[red]FAILS the rules[/]" if state is False else
               "[green]meets the rules checked[/]" if state else
               "[yellow]no rule failed, but not every rule could be applied[/]")
    more = "" if details else " (--details lists every finding and its rule)"
    console.print(f"{passed} passed, {failed(findings)} failed, {na} not applicable: "
                  f"{verdict}{escape(more)}", highlight=False, soft_wrap=True)


def _details(findings: list[Finding], console: Console) -> None:
    """One row per finding, then the documents the rules cite."""
    table = Table(title="Details", title_justify="left")
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("subject", overflow="fold", ratio=2)
    table.add_column("finding", overflow="fold", ratio=4)
    table.add_column("rule", overflow="fold", ratio=2)
    for f in findings:
        colour = COLOURS.get(f.status, "yellow")
        table.add_row(f"[{colour}]{f.status}[/]", f.check, escape(f.subject),
                      escape(f.sentence), escape(str(f.rule)))
    console.print(table)
    cited = {f.rule.document for f in findings} | {f.rule.against for f in findings} - {""}
    for name in sorted(cited):
        console.print(f"{name}: {DOCUMENTS[name]}", soft_wrap=True, highlight=False)


def as_json(findings: list[Finding], division: str, chosen: Selection) -> str:
    """The summary, every finding and the runs skipped as one JSON document."""
    skipped = [{"run_id": r.run_id, "folder": str(r.path), "workload": r.workload}
               for r in chosen.skipped]
    return json.dumps({"division": division, "runs": len(chosen.judged),
                       "families": chosen.families(), "skipped": skipped,
                       "ready": ready(findings), "failed": failed(findings),
                       "checklist": checklist(findings),
                       "findings": [f.as_dict() for f in findings]}, indent=2)
