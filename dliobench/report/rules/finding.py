"""A finding: what one rule says of a run or a set of runs, and where the rule is written.

The rules are MLPerf Storage v3.0's for training, read in mlcommons/storage at the stored
versions cited below (the index holds no single commit with every v3.0 file; the v3.0
release is storage tag v3.0 @ ce28a98, per ``mlpstorage_py/rules/editions.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dliobench.report.rules.references import REFERENCES

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"

# The documents the checks cite: a short name, and the repository path@commit it stands for.
RULES_MD = "Rules.md"
GUIDELINES_MD = "Submission_guidelines.md"
EDITIONS_YAML = "editions.yaml"
TRAINING_SUBMISSION_PY = "submission_checkers/training.py"
KV_README = "kv_cache_benchmark/README.md"
VDB_CONFIG = "mlpstorage_py/config.py"
VDB_CHECKER = "run_checkers/vectordb.py"
DOCUMENTS = {
    KV_README: "mlcommons/storage kv_cache_benchmark/README.md"
               "@0e06e6b6af736853cb846c653711661a0c97549f",
    RULES_MD: "mlcommons/storage Rules.md@0366ccfc9fc629dde3379a8022cb4c4ff8285b53",
    VDB_CONFIG: "mlcommons/storage mlpstorage_py/config.py"
                "@be69aeb5dccb701ae207b27820b7ae7c7bcf80b1",
    VDB_CHECKER: "mlcommons/storage mlpstorage_py/rules/run_checkers/vectordb.py"
                 "@0868711a4f3a1daf938673c05406fc6577297c45",
    GUIDELINES_MD: "mlcommons/storage Submission_guidelines.md"
                   "@caa90c9c7d6a543de815222fff834a846823f922",
    EDITIONS_YAML: "mlcommons/storage mlpstorage_py/rules/editions.yaml"
                   "@0e57fc408e4878715c757c43f224cc5ed9e478bb",
    TRAINING_SUBMISSION_PY: "mlcommons/storage mlpstorage_py/rules/submission_checkers/"
                            "training.py@0bc0729bdce399ea21816bea892dc5f587631870",
    # the upstream workload files runs are compared with (rules/references.py)
    **{r.name: r.citation for r in REFERENCES},
}


@dataclass(frozen=True)
class Rule:
    """Where a rule is written: a document (one of ``DOCUMENTS``) and its section, and the
    upstream workload file (one of ``DOCUMENTS``) whose values it was applied with, if any."""

    document: str
    section: str
    against: str = ""

    def __str__(self) -> str:
        return f"{self.document} {self.section}" + (
            f", against {self.against}" if self.against else "")

    def applied_to(self, reference: str) -> Rule:
        """The rule as applied with the values of upstream file ``reference``."""
        return Rule(self.document, self.section, reference)

    @property
    def citation(self) -> str:
        """The document as repository path@commit."""
        return DOCUMENTS[self.document]


@dataclass(frozen=True)
class Fix:
    """One line of what to change for a failing finding: a key (or, where no key decides it,
    what is measured), the value the rules need and the value the run has."""

    key: str
    need: str
    have: str

    def as_dict(self) -> dict[str, str]:
        """The fix as plain data."""
        return {"key": self.key, "need": self.need, "have": self.have}


@dataclass(frozen=True)
class Finding:
    """One check's outcome for one subject (a run id, or a set of runs)."""

    check: str
    status: str  # PASS, FAIL or NOT_APPLICABLE
    subject: str
    sentence: str
    rule: Rule
    fixes: tuple[Fix, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The finding as plain data (``dliobench check --json``)."""
        rule = {"document": self.rule.citation, "section": self.rule.section}
        if self.rule.against:
            rule["against"] = DOCUMENTS[self.rule.against]
        return {"check": self.check, "status": self.status, "subject": self.subject,
                "sentence": self.sentence, "rule": rule,
                "fixes": [f.as_dict() for f in self.fixes]}


def finding(check: str, ok: bool | None, subject: str, sentence: str, rule: Rule,
            fixes: tuple[Fix, ...] = ()) -> Finding:
    """A finding from a verdict: True passes, False fails, None does not apply. ``fixes``
    (what to change) belong to a failing finding only."""
    status = NOT_APPLICABLE if ok is None else PASS if ok else FAIL
    return Finding(check, status, subject, sentence, rule, fixes if status == FAIL else ())


def failed(findings: list[Finding]) -> int:
    """How many findings failed."""
    return sum(f.status == FAIL for f in findings)
