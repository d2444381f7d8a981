"""The report's per-node tables: for each run on more than one node, its nodes' figures as
its console showed them (result.json ``nodes``), the straggler nodes marked, so a reader sees
which node held a run up next to the runs table's "straggler node(s)" column."""

from __future__ import annotations

import html
from typing import Any

from dliobench.report.runs import RunSet
from dliobench.results.nodes import STRAGGLER_NODE_FRACTION
from dliobench.results.schema import NodeMetrics

HEADERS = ("node", "ranks", "AU", "samples/s", "MB read", "wait", "straggler")


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _cells(node: NodeMetrics, slow: list[str]) -> list[str]:
    """One node's row: the figures the console's per-node table shows."""
    return [node["host"], str(len(node["ranks"])), _pct(node["au"]),
            f"{node['samples_per_s'] or 0:,.1f}", f"{(node.get('bytes') or 0) / 1e6:,.1f}",
            _pct(node.get("wait_share")), "yes" if node["host"] in slow else ""]


def nodes_html(rs: RunSet) -> str:
    """A per-node table for each run on more than one node; empty when there is none."""
    parts = []
    for run, label in zip(rs.runs, rs.table["label"], strict=True):
        nodes = run.result.get("nodes") or []
        if len(nodes) < 2:
            continue
        slow = (run.result.get("metrics") or {}).get("straggler_nodes") or []
        head = "".join(f"<th>{h}</th>" for h in HEADERS)
        rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(n, slow))
                       + "</tr>" for n in nodes)
        title = run.run_id if str(label) == run.run_id else f"{label} ({run.run_id})"
        parts.append(f"<h3>{html.escape(title)}</h3>"
                     f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
                     f"<tbody>{rows}</tbody></table></div>")
    if not parts:
        return ""
    return ("<h2>Per node</h2><p class=\"meta\">Runs on more than one node; a straggler's "
            f"samples/s per rank fell below {100 * STRAGGLER_NODE_FRACTION:.0f} % of the "
            "median node's.</p>" + "".join(parts))
