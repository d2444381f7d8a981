"""`dliobench report`'s first section answers per workload what the storage sustained, what
limited it and the evidence, in the figures the tables print; labels never hide a workload
or a run set's roles; equal scaling lines stay visible; the checkpoint figure is bars."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from dliobench.cli.main import main
from dliobench.report.html import render
from dliobench.report.labels import run_labels
from dliobench.report.maxaccel import MaxSearch
from dliobench.report.plots.scaling import scaling_figure
from dliobench.report.runs import RunSet, load_runs
from dliobench.report.sweep import PointOutcome, SweepSpec, save_summary
from dliobench.report.tables import run_set
from dliobench.results.verdict import verdict_words
from tests.conftest import tiny_workload


def _run(root: Path, name: str, out: Path, *overrides: str) -> dict[str, Any]:
    """A real tiny run of workload ``name`` into ``out``; its result."""
    doc = tiny_workload(model={"name": name}, dataset={"data_folder": str(root / "data"),
                                                       "num_files_train": 4},
                        train={"computation_time": 0.002, "epochs": 1})
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["run", str(path), "--no-progress", "--output", str(out), *overrides]) == 0
    [result] = [json.loads(p.read_text()) for p in out.glob("*/result.json")]
    return result


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict[str, Any]]]:
    """The report of two workloads: one run that meets its (low) floor, probed by a find-max sweep
    (its sweep.json written by the sweep's own code), and one held to a floor of 100 %, which
    no run meets; the page and each workload's result."""
    root = tmp_path_factory.mktemp("answers")
    sweep = root / "runs" / "find-max"
    met = _run(root, "small", sweep / "r1", "metric.au=0.1")  # met on a busy host too
    below = _run(root, "strict", root / "runs" / "strict", "metric.au=1.0")
    probe = PointOutcome("r1", 1, {}, run_dir=str(next((sweep / "r1").iterdir())), result=met)
    search = MaxSearch(sweep, "", 1, best=probe, probes=[probe])
    save_summary(sweep, SweepSpec("find-max", root / "small.yaml", [], {}), [probe],
                 {"search": search.summary()})
    page = render(run_set(load_runs([root / "runs"])), [], ["runs"])  # the page, no figures
    return page, {"small": met, "strict": below}


def _blocks(text: str) -> dict[str, dict[str, str]]:
    """{workload: {sustained, limited by, evidence}} of the first section, as plain text."""
    section = text[text.index('<section id="answers">'):text.index("</section>")]
    out = {}
    for name, body in re.findall(r'<div class="answer" data-workload="([^"]+)">(.*?)</div>',
                                 section):
        fields = dict(re.findall(r"<dt>([^<]+)</dt><dd>(.*?)</dd>", body))
        out[html.unescape(name)] = {k: html.unescape(re.sub(r"<[^>]+>", " ", v))
                                    for k, v in fields.items()}
    return out


def test_the_first_section_holds_each_workload_s_verdict_and_figures(
        page: tuple[str, dict[str, dict[str, Any]]]) -> None:
    text, results = page
    assert text.index('<section id="answers">') < text.index("<table")  # before any table
    blocks = _blocks(text)
    assert list(blocks) == ["small", "strict"]
    for workload, result in results.items():
        block, m, verdict = blocks[workload], result["metrics"], result["verdict"]
        au, floor = f"{100 * m['au']:.1f} %", f"{100 * verdict['au_floor']:.1f} %"
        assert f"AU {au}" in block["sustained"] and f"{floor} floor" in block["sustained"]
        assert f"read {m['bytes_per_s'] / 1e6:,.1f} MB/s" in block["evidence"]
        assert f"{m['samples_per_s']:,.1f} samples/s" in block["evidence"]
        assert f"wait p99 {m['wait_p99_s'] * 1e3:,.2f} ms" in block["evidence"]
        assert f"verdict: {verdict['reason']}" in block["evidence"]
        runs_table = text[text.index('id="runs"'):]
        assert f"<td class=\"num\">{au}</td>" in runs_table  # the same figure, printed alike
    assert results["small"]["verdict"]["meets_floor"] is True
    assert blocks["small"]["sustained"].startswith(
        "a find-max sweep found 1 × custom sustained at the AU floor (at least: its cap, "
        "--max-accelerators 1, was reached). Runs: 1 × custom at AU")
    assert blocks["small"]["limited by"] == "nothing in these runs: each met its AU floor"
    strict = results["strict"]["verdict"]
    assert strict["meets_floor"] is False
    assert blocks["strict"]["sustained"].startswith("no run met its 100.0 % floor; the best: AU")
    assert blocks["strict"]["limited by"].startswith(f"{verdict_words(strict)} (1 run)")


def test_labels_name_the_workload_and_a_run_set_s_roles() -> None:
    """Issue 49: "1 rank" (default) beside "2 ranks" (unet3d) read as a collapse in scaling;
    a --loops set was labelled by seed alone."""
    mixed = pd.DataFrame([{"run_id": "a", "ranks": 1, "workload": "default", "x.size": 4},
                          {"run_id": "b", "ranks": 2, "workload": "unet3d", "x.size": 1}])
    assert run_labels(mixed, [("workload", "x.size")]) == ["default; 1 rank", "unet3d; 2 ranks"]
    sweep = mixed.assign(user_label=["4 MiB", "256 KiB"])
    assert run_labels(sweep, [("workload", "x.size")]) == [
        "default: 4 MiB; 1 rank", "unet3d: 256 KiB; 2 ranks"]
    loops = pd.DataFrame([{"run_id": str(i), "ranks": 1, "workload": "w", "train.seed": 123 + i,
                           "role": role} for i, role in
                          enumerate(("warm-up", "scored 1 of 2", "scored 2 of 2"))])
    assert run_labels(loops, [("train.seed",)]) == [
        "warm-up; seed=123", "scored 1 of 2; seed=124", "scored 2 of 2; seed=125"]


def test_equal_scaling_lines_stay_visible() -> None:
    """Two lines with the same figures (read_threads 4 exactly where 1 is) are drawn apart,
    with their own markers and dashes, the ticks on the rank counts."""
    rows = [{"run_id": f"{t}-{r}", "ranks": r, "reader.read_threads": t, "workload": "w",
             "au": 0.95, "samples_per_s": 100.0 * r, "mb_per_s": 10.0 * r, "au_floor": 0.9,
             "compute_s_per_batch": 0.0, "batch": 2, "user_label": ""}
            for t in (1, 4) for r in (1, 2, 4)]
    table = pd.DataFrame(rows)
    fig, note = scaling_figure(RunSet([], table, ["reader.read_threads"],
                                      [("reader.read_threads",)]))
    assert fig is not None and "drawn a little apart sideways" in note
    for ax in fig.axes:
        measured = [line for line in ax.lines if line.get_marker() in ("o", "s")]
        assert len(measured) == 2
        first, second = (np.asarray(line.get_xdata(), dtype=float) for line in measured)
        assert np.all(first < second) and np.allclose(first / second, 2 ** -0.035)
        assert list(ax.get_xticks()) == [1, 2, 4]
        assert measured[0].get_linestyle() != measured[1].get_linestyle()
