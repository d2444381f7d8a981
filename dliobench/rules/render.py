"""Findings for people (a rich table) and for scripts (JSON)."""

from __future__ import annotations

import json

from rich.console import Console
from rich.table import Table

from dliobench.rules.finding import DOCUMENTS, FAIL, PASS, Finding, failed

COLOURS = {PASS: "green", FAIL: "red"}


def print_table(findings: list[Finding], division: str, runs: int,
                console: Console | None = None) -> None:
    """One row per finding (status, check, subject, sentence, rule), then a one-line total."""
    console = console or Console()
    table = Table(title=f"MLPerf Storage v3.0 training rules, {division.upper()} division: "
                  f"{runs} run(s)", title_justify="left")
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("subject", overflow="fold", ratio=2)
    table.add_column("finding", overflow="fold", ratio=4)
    table.add_column("rule", overflow="fold", ratio=2)
    for f in findings:
        colour = COLOURS.get(f.status, "yellow")
        table.add_row(f"[{colour}]{f.status}[/]", f.check, f.subject, f.sentence,
                      str(f.rule))
    console.print(table)
    for name in sorted({f.rule.document for f in findings}):
        console.print(f"{name}: {DOCUMENTS[name]}",
                      soft_wrap=True, highlight=False)
    bad = failed(findings)
    passed = sum(f.status == PASS for f in findings)
    na = len(findings) - bad - passed
    verdict = "[red]FAILS the rules[/]" if bad else "[green]meets the rules checked[/]"
    console.print(f"{passed} passed, {bad} failed, {na} not applicable: {verdict}",
                  highlight=False)


def as_json(findings: list[Finding], division: str, runs: int) -> str:
    """The findings as one JSON document."""
    return json.dumps({"division": division, "runs": runs, "failed": failed(findings),
                       "findings": [f.as_dict() for f in findings]}, indent=2)
