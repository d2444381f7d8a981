"""``dliobench report``: runs -> ``report.html`` (self-contained), its PNGs and ``runs.csv``."""

from __future__ import annotations

import base64
import datetime as dt
import html
import numbers
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dliobench.base.errors import InputError
from dliobench.report import cells
from dliobench.report.answers import answers_html
from dliobench.report.labels import label_keys, label_parts, plural, telling_keys
from dliobench.report.nodes_html import nodes_html
from dliobench.report.plots.checkpoints import checkpoints
from dliobench.report.plots.comparison import comparison
from dliobench.report.plots.figure import Plot
from dliobench.report.plots.kvcache import kvcache_plots
from dliobench.report.plots.scaling import scaling
from dliobench.report.plots.timeline import timeline
from dliobench.report.plots.vectordb import vectordb_plots
from dliobench.report.plots.waits import wait_cdf
from dliobench.report.runs import RunSet, load_runs
from dliobench.report.tables import run_set

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1500px; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.meta { color: #666; }
.note { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 1em; margin: 0.5em 0; }
.absent { color: #666; font-style: italic; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; white-space: nowrap; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafafa; }
.scroll { overflow-x: auto; }
ul.settings { font-size: 13px; line-height: 1.5; } ul.settings code { color: #444; }
img { max-width: 100%; border: 1px solid #eee; }
.answer { border: 1px solid #ccd; border-radius: 4px; padding: 0.2em 1em 0.6em; margin: 0.8em 0; }
.answer h3 { margin: 0.4em 0; } .answer h3 .meta { font-weight: normal; font-size: 0.8em; }
.answer dl { display: grid; grid-template-columns: 8em 1fr; gap: 0.2em 1em; margin: 0; }
.answer dt { font-weight: bold; } .answer dd { margin: 0; }
.answer ul { margin: 0; padding-left: 1.2em; }
#runs th, #runs td:not(.num) { white-space: normal; } #runs td.label { min-width: 12em; }
"""

# differing config keys already shown as a column of the settings table
SHOWN_AS = {"train.computation_time", "reader.data_loader", "dataset.format",
            "dataset.num_samples_per_file", "dataset.num_subfolders_train", "reader.file_access",
            "reader.read_threads", "reader.batch_size", "train.accelerator", "metric.au"}
# runs.csv only: "reads from storage" says the first in words, the label the others
HIDDEN = {"page_cache_possible", "role", "user_label"}


def _cell(row: pd.Series, column: str) -> str:
    value = row.get(column)
    number = cells.formatted(column) or (
        isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_)))
    cls = ' class="num"' if number else ' class="label"' if column == "label" else ""
    return f"<td{cls}>{html.escape(cells.row_text(row, column))}</td>"


def table_html(table: pd.DataFrame, cols: Sequence[str], table_id: str) -> str:
    """Columns ``cols`` of the runs table, a row per run, units in every number."""
    head = "".join(f"<th>{html.escape(cells.header(c))}</th>" for c in cols)
    body = "".join(f"<tr>{''.join(_cell(row, c) for c in cols)}</tr>"
                   for _, row in table.iterrows())
    return (f'<div class="scroll" id="{table_id}"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def result_columns(table: pd.DataFrame) -> list[str]:
    """The runs table's columns: what each run achieved (``cells.RESULT_COLUMNS``), those
    no run has a value of left out."""
    return [c for c in cells.RESULT_COLUMNS if c in table and (
        c in ("label", "verdict") or table[c].notna().any())]


def setting_columns(table: pd.DataFrame) -> list[str]:
    """The settings table's columns: the run, then everything not in the runs table, the
    differing configuration keys last."""
    shown = set(cells.RESULT_COLUMNS)
    cols = ["label"] + [c for c in cells.COLUMNS if c in table and c not in shown]
    return cols + [str(c) for c in table if c not in cells.COLUMNS and c not in SHOWN_AS | HIDDEN]


def differing_html(rs: RunSet) -> str:
    """The settings that differ, one line per group of settings that change together: the
    telling key's values, each with the runs that have it (when not every run differs) and
    the values the other keys of the group take with it."""
    if not rs.differing:
        return '<p class="meta">The runs share every setting but the rank count.</p>'
    t, items = rs.table, []
    for factor in rs.factors:
        keys = [k for k in factor if k in t]
        if not keys:
            continue
        lead = telling_keys(factor)[0] if telling_keys(factor)[0] in t else keys[0]
        rest = [k for k in keys if k != lead]
        groups: dict[str, list[str]] = {}
        details: dict[str, str] = {}
        named = label_parts(t, factor)  # the sweep's own name of each value
        for i, (_, row) in enumerate(t.iterrows()):
            value = cells.text(lead, row[lead]) or "none"
            groups.setdefault(value, []).append(named[i] if named else str(row["label"]))
            details[value] = ", ".join(f"{k.split('.')[-1]} {cells.text(k, row[k])}" for k in rest)
        parts = []
        for value, labels in groups.items():
            names = list(dict.fromkeys(labels))
            which = (names[0] if named else ", ".join(names) if len(names) <= 3
                     else plural(len(names), "run"))
            runs = f" ({which})" if lead not in ("workload",) and \
                (named or len(groups) < len(t)) else ""
            more = f": {details[value]}" if details[value] else ""
            parts.append(f"<b>{html.escape(value)}</b>{html.escape(runs + more)}")
        head = f"<code>{html.escape(lead)}</code>"
        if rest:
            head += f" (and {len(rest)} setting(s) that change with it)"
        items.append(f"<li>{head}: {' &middot; '.join(parts)}</li>")
    return f'<ul class="settings">{"".join(items)}</ul>'


def legend_html(rs: RunSet) -> str:
    """What each run's label stands for: a row per run with its values of the settings that
    name the differing factors; the values its label names in bold."""
    t, named = rs.table, label_keys(rs)
    keys = [k for f in rs.factors for k in dict.fromkeys(
        [*telling_keys(f), *(k for run in named for k in run if k in f)]) if k in t]
    keys += ["ranks"] if any("ranks" in run for run in named) else []
    if not keys:
        return ""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ("run", "run id", *keys))
    rows = []
    for i, (_, row) in enumerate(t.iterrows()):
        tds = "".join(f"<td><b>{html.escape(cells.text(k, row[k]))}</b></td>" if k in named[i]
                        else f"<td>{html.escape(cells.text(k, row[k]))}</td>" for k in keys)
        rows.append(f"<tr><td>{html.escape(str(row['label']))}</td>"
                    f"<td>{html.escape(str(row['run_id']))}</td>{tds}</tr>")
    return (f'<h2>Run labels</h2><p class="meta">Each label names only what tells its run '
            f"apart (in bold), shortest first; the settings that name each difference:</p>"
            f'<div class="scroll" id="legend"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def notes(rs: RunSet) -> list[str]:
    """Warnings a reader must see before comparing the numbers."""
    t, out = rs.table, []
    for col, what in (("dliobench_version", "dliobench versions"), ("commit", "code commits"),
                      ("hosts", "machines")):
        values = sorted({str(v) for v in t[col]})
        if len(values) > 1:
            out.append(f"The runs come from different {what}: {', '.join(values)}. "
                       "Differences may come from that, not from the settings.")
    if any(str(c).endswith("-dirty") for c in t["commit"]):
        out.append("Some runs were made with uncommitted changes (commit ends in -dirty).")
    cached = t.loc[t["page_cache_possible"] == True, "label"].tolist()  # noqa: E712
    if cached:  # the same answer as each run's console line "reads from storage"
        out.append(f"{len(cached)} of {len(t)} run(s) may have read from the page cache (RAM), "
                   "not storage: their throughput is not a storage figure (column \"reads "
                   "from storage\").")
    partial = t.loc[t["status"] != "complete", "run_id"].tolist()
    if partial:
        out.append(f"Not complete (status partial): {', '.join(partial)}.")
    return out


def _figure(plot: Plot) -> str:
    title = f"<h2>{html.escape(plot.title)}</h2>"
    if plot.path is None:
        return f'{title}<p class="absent">{html.escape(plot.note)}</p>'
    data = base64.b64encode(plot.path.read_bytes()).decode("ascii")
    return (f'{title}<img alt="{html.escape(plot.title)}" src="data:image/png;base64,{data}">'
            f"<p>{html.escape(plot.note)}</p>")


def render(rs: RunSet, figures: Sequence[Plot], sources: Iterable[str]) -> str:
    """The whole HTML page (inline CSS, images as data URIs: no network, one file)."""
    now = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    warn = "".join(f'<div class="note">{html.escape(n)}</div>' for n in notes(rs))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dliobench report</title>
<style>{CSS}</style></head><body>
<h1>dliobench report</h1>
<p class="meta">{len(rs.runs)} run(s) from {html.escape(", ".join(sources))}; made {now}.</p>
{answers_html(rs)}
{warn}
<h2>Runs</h2>
{table_html(rs.table, result_columns(rs.table), "runs")}
<p class="meta">AU = compute time / wall time of the counted steps (first
<code>metric.exclude_start_steps</code> of each epoch left out), mean over ranks and epochs;
rates are summed over ranks. MB = 10<sup>6</sup> bytes actually read. Wait = time a step
blocked on the loader. The verdict says what limited a run below its AU floor.</p>
<h2>Settings of each run</h2>
{table_html(rs.table, setting_columns(rs.table), "settings")}
<h2>Settings that differ</h2>
{differing_html(rs)}
{legend_html(rs)}
{nodes_html(rs)}
{"".join(_figure(p) for p in figures)}
</body></html>
"""


def write_report(paths: Sequence[str | Path], out: Path | None = None,
                 timeline_run: str | None = None) -> Path:
    """Read the runs below ``paths`` and write report.html, the PNGs and runs.csv to ``out``."""
    rs = run_set(load_runs(paths))
    if timeline_run is not None and timeline_run not in set(rs.table["run_id"]):
        raise InputError(f"--timeline-run {timeline_run}: no such run among "
                         f"{', '.join(rs.table['run_id'])}")
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = out or Path("reports") / f"report-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    rs.table.to_csv(out / "runs.csv", index=False)
    figures = [scaling(rs, out), comparison(rs, out), wait_cdf(rs, out),
               timeline(rs, out, timeline_run), checkpoints(rs, out), *kvcache_plots(rs, out),
               *vectordb_plots(rs, out)]
    page = out / "report.html"
    page.write_text(render(rs, figures, [str(p) for p in paths]), encoding="utf-8")
    return page
