"""`dliobench check`'s summary: ready only when every finding passed, one checklist line per
key and needed value (runs that need the same change share a line), nothing cut short."""

from __future__ import annotations

from dliobench.report.rules.finding import RULES_MD, Fix, Rule, finding
from dliobench.report.rules.render import checklist, ready, summary_lines

RULE = Rule(RULES_MD, "§3.6.2 trainingClosedSubmissionParameters")


def test_a_rule_not_applied_is_not_a_pass() -> None:
    findings = [finding("complete", True, "run-0", "the run ran to its end", RULE),
                finding("run spread", None, "setup", "fewer than 2 complete runs", RULE)]
    assert ready(findings) is None
    assert summary_lines(findings, "closed") == [
        "CLOSED-ready: not known (1 check(s) could not be applied: run spread)"]
    assert ready(findings[:1]) is True
    assert summary_lines(findings[:1], "open") == ["OPEN-ready: yes (all 1 findings pass)"]


def test_the_checklist_names_each_key_once_with_its_runs() -> None:
    fix = Fix("train.epochs", "5", "1")
    findings = [finding("parameters", False, f"run-{i}", "...", RULE, (fix,)) for i in range(3)]
    findings.append(finding("run count", False, "setup", "1 complete run(s)", RULE))
    findings.append(finding("complete", True, "run-0", "ok", RULE, (Fix("status", "x", "y"),)))
    assert ready(findings) is False
    assert checklist(findings) == [
        {"check": "parameters", "key": "train.epochs", "need": "5", "have": "1",
         "subjects": ["run-0", "run-1", "run-2"]},
        {"check": "run count", "key": "", "need": "1 complete run(s)", "have": "",
         "subjects": ["setup"]}]
    assert summary_lines(findings, "closed") == [
        "CLOSED-ready: no (4 of 5 findings fail)",
        "What to change (key: value the rules need):",
        "  - train.epochs: 5 (has 1)  [parameters; 3 runs]",
        "  - run count: 1 complete run(s)  [run count; setup]"]
