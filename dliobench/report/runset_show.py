"""The end of ``dliobench run --repeat N``: the set as a table (per-run AU and samples/s, or
checkpoint rates), the scored runs' mean ± stdev, and the rules' verdict on the set, which
also goes into the set document (``verdict``). The runs are read back from their folders, as
``dliobench check`` reads them, so both judge the same set the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dliobench.report.rules import registry
from dliobench.report.rules.finding import Finding
from dliobench.results.console import BELOW_FLOOR_EXIT
from dliobench.results.files import write_json

if TYPE_CHECKING:
    from dliobench.run.runset import SetOutcome


def judge(doc: dict[str, Any], folder: Path) -> list[Finding]:
    """The set checks of the set's family over its finished runs (CLOSED division), with
    the write set's runs before a split form's read invocation."""
    earlier = [Path(f) for f in (doc.get("split") or {}).get("write_runs", [])]
    runs = registry.load_runs([*earlier, *(folder / r["folder"] for r in doc["runs"])])
    if not runs:
        return []
    return [check(runs, "closed") for check in registry.SET_CHECKS[registry.family(runs[0])]]


def _pct(value: Any) -> str:
    return f"{100 * value:.1f} %" if isinstance(value, int | float) else "-"


def _num(value: Any, scale: float = 1.0) -> str:
    if isinstance(value, int) and scale == 1.0:
        return str(value)
    return f"{value / scale:,.1f}" if isinstance(value, int | float) else "-"


def table(doc: dict[str, Any]) -> Table:
    """One row per run of the set."""
    ckpt, vdb = doc["family"] == "checkpointing", doc["family"] == "vectordb"
    out = Table(title=f"Run set {doc['set_id']} ({doc['finished']} of {doc['planned']} runs, "
                f"{doc['state']})", title_justify="left")
    heads = (["writes", "write MB/s", "reads", "read MB/s"] if ckpt else
             ["queries/s", "recall@k", "valid"] if vdb else ["AU", "samples/s"])
    for head in ["#", "run", "role", "status", *heads]:
        out.add_column(head, no_wrap=head != "run", overflow="fold")
    for r in doc["runs"]:
        role = "warm-up" if r["warmup"] else "scored"
        cells = ([_num(r.get("checkpoint_writes")), _num(r.get("checkpoint_write_bytes_per_s"),
                  1e6), _num(r.get("checkpoint_reads")),
                  _num(r.get("checkpoint_read_bytes_per_s"), 1e6)] if ckpt else
                 [_num(r.get("qps")), f"{r.get('recall') or 0:.4f}",
                  "yes" if r.get("valid") else "no"] if vdb else
                 [_pct(r.get("au")), _num(r.get("samples_per_s"))])
        out.add_row(str(r["index"] + 1), escape(str(r["run_id"])), role, str(r["status"]),
                    *cells)
    return out


def spread_line(doc: dict[str, Any]) -> str | None:
    """The scored runs' mean ± stdev (training), or None."""
    s = doc["scored"]
    if doc["family"] != "training" or not s["count"]:
        return None
    return (f"{s['count']} scored run(s): AU {_pct(s['au_mean'])} ± {_pct(s['au_stdev'])}, "
            f"samples/s {_num(s['samples_per_s_mean'])} ± {_num(s['samples_per_s_stdev'])}")


def show_set(done: SetOutcome, fail_below_floor: bool = False) -> int:
    """Print the set and the rules' verdict on it (rank 0; others print nothing) and record
    the verdict in the set document. The exit status: ``BELOW_FLOOR_EXIT`` when a scored run
    missed its AU floor and that should fail (``--fail-below-floor``), else 0 (the rules'
    verdict does not fail the runs: ``dliobench check`` does that)."""
    if done.document is None:
        return 0
    doc = json.loads(done.document.read_text())
    findings = judge(doc, done.document.parent)
    console = Console()
    console.print(table(doc))
    line = spread_line(doc)
    if line:
        console.print(line, highlight=False)
    for f in findings:
        colour = {"pass": "green", "fail": "red"}.get(f.status, "yellow")
        console.print(f"[{colour}]{f.status}[/] {f.check}: {escape(f.sentence)} "
                      f"[dim]({escape(str(f.rule))})[/]", soft_wrap=True, highlight=False)
    console.print(f"set document: {done.document}", soft_wrap=True, highlight=False)
    write_json(done.document, {**doc, "verdict": [f.as_dict() for f in findings]})
    missed = [r for r in doc["runs"] if not r["warmup"] and r.get("meets_floor") is False]
    return BELOW_FLOOR_EXIT if fail_below_floor and missed else 0
