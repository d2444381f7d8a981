"""`dliobench report` tells the truth about real runs: no empty comparison for checkpoint-only
runs, no page-cache banner where the runs read from storage, labels that name only what
differs, uncounted steps drawn apart, and the demand at the AU floor on the scaling plot."""

from __future__ import annotations

import io
import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from rich.console import Console

from dliobench.cli.main import main
from dliobench.comm.world import ThreadGroup, World
from dliobench.config.load import load
from dliobench.report.html import render
from dliobench.report.plots import comparison, figure, scaling, timeline
from dliobench.report.runs import RunSet, load_runs, load_timeline
from dliobench.report.tables import run_set
from dliobench.results.ckpt_console import print_checkpoint_summary
from dliobench.run import session as benchmark

PRESET = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
BANNER = "may have read from the page cache"


def _train(root: Path, folder: str, *overrides: str, ranks: int = 1) -> None:
    """A tiny training run (16 files of 64 KiB, one epoch) with ``ranks`` thread ranks."""
    cfg, warnings = load(None, [f"dataset.data_folder={root / 'data'}", "train.epochs=1",
                                f"output.folder={root / folder}", "dataset.num_files_train=16",
                                "dataset.record_length_bytes=65536",
                                "dataset.record_length_bytes_stdev=0",
                                "dataset.record_length_bytes_resize=65536",
                                "reader.batch_size=2", "train.computation_time=0.002",
                                *overrides])
    comms = ThreadGroup(ranks).comms()

    def one(rank: int) -> None:
        world = World(rank=rank, size=ranks, local_rank=rank, local_size=ranks, host="h")
        benchmark.run(cfg, world, comms[rank], warnings, show_progress=False)

    with ThreadPoolExecutor(ranks) as pool:
        list(pool.map(one, range(ranks)))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real runs: two checkpoint-only ones (reads after eviction), a training run that dropped
    the cache, and plain training runs with 1 and 2 ranks and with 2 read threads."""
    root = tmp_path_factory.mktemp("truth")
    for writes in (1, 2):
        assert main(["run", str(PRESET), "checkpoint.scale=0.0001", "checkpoint.file_format=raw",
                     "checkpoint.time_between_checkpoints=0", "checkpoint.num_checkpoints_read=1",
                     f"checkpoint.num_checkpoints_write={writes}", "--no-progress",
                     f"checkpoint.checkpoint_folder={root / 'ckpt'}",
                     "--output", str(root / "ckpt_runs")]) == 0
    _train(root, "evicted", "storage.drop_cache=true")
    _train(root, "train")
    _train(root, "train", ranks=2)
    _train(root, "train", "reader.read_threads=2")
    return root


def _set(root: Path, *folders: str) -> RunSet:
    return run_set(load_runs([root / f for f in folders]))


def _report(root: Path, name: str, *folders: str) -> str:
    assert main(["report", *(str(root / f) for f in folders), "-o", str(root / name)]) == 0
    return (root / name / "report.html").read_text()


def test_a_checkpoint_only_report_draws_no_empty_comparison(root: Path) -> None:
    page = _report(root, "ckpt_page", "ckpt_runs")
    assert not (root / "ckpt_page/comparison.png").exists()
    assert "Not drawn: no run read training data" in page
    assert (root / "ckpt_page/checkpoints.png").is_file()
    fig, note = comparison.comparison_figure(_set(root, "ckpt_runs", "train"))
    assert fig is not None and "2 runs without training figures" in note
    for ax in fig.axes:  # no panel of n/a bars: every bar has its value
        texts = [t.get_text() for t in ax.texts]
        assert len(texts) == 3 and "n/a" not in texts, (ax.get_title(), texts)


def _page(rs: RunSet) -> str:
    """The report's page without its figures: banner, runs table, settings, label legend."""
    return render(rs, [], ["runs"])


def test_runs_that_read_from_storage_get_no_page_cache_banner(root: Path) -> None:
    """The banner agrees with each run's own console line "reads from storage"."""
    rs = _set(root, "ckpt_runs", "evicted")
    page = _page(rs)
    assert BANNER not in page
    for run in (r for r in rs.runs if "llama3_8b" in r.run_id):
        out = io.StringIO()
        print_checkpoint_summary(run.result, str(run.path), Console(file=out, width=300))
        assert re.search(r"reads from storage\s*│\s*yes \(evicted\)", out.getvalue())
    assert list(rs.table["reads_from_storage"]) == ["yes (evicted)"] * 3
    assert page.count("<td>yes (evicted)</td>") == 3
    mixed = _page(_set(root, "ckpt_runs", "evicted", "train"))
    assert f"3 of 6 run(s) {BANNER}" in mixed  # the three plain runs, and only they


def test_mixed_runs_are_labelled_by_what_differs_with_a_legend(root: Path) -> None:
    """Each run named by its workload first (runs of two workloads), then the fewest
    differences that tell it from every other run, shortest first; the legend table gives
    each label's run and settings."""
    rs = _set(root, "ckpt_runs", "evicted", "train")
    labels = dict(zip(rs.table["run_id"], rs.table["label"], strict=True))
    assert sorted(labels.values()) == sorted([
        "llama3_8b, num_checkpoints_write=1; 1 rank",  # beside another workload's 2 ranks
        "llama3_8b, num_checkpoints_write=2; 1 rank",
        "default; drop_cache=True", "default; read_threads=2",  # departures from the
        "default; 2 ranks", "default; 1 rank; read_threads=1; drop_cache=False"])  # baseline
    legend = _page(rs)
    legend = legend[legend.index("<h2>Run labels</h2>"):]
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td>", legend)
    assert {rid: lab for lab, rid in rows} == labels
    headers = re.findall(r"<th>([^<]*)</th>", legend[:legend.index("</thead>")])
    assert headers == ["run", "run id", "workload", "checkpoint.num_checkpoints_write",
                       "reader.read_threads", "storage.drop_cache", "ranks"]


def _drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, Figure]:
    """The figures the report saves, by name (the PNGs are written as ever)."""
    figures: dict[str, Figure] = {}
    save = figure.save

    def keep(fig: Figure, out: Path, name: str) -> Path:
        figures[name] = fig
        return save(fig, out, name)

    monkeypatch.setattr(figure, "save", keep)
    return figures


def test_the_timeline_draws_uncounted_steps_apart(root: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rs = _set(root, "train")
    run = next(r for r in rs.runs if r.result["ranks_count"] == 2)
    data = load_timeline(run)
    assert data is not None and set(data["counted"]) == {0, 1}
    figures = _drawn(monkeypatch)
    timeline.timeline(rs, tmp_path, run.run_id)
    fig = figures["timeline"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "wait (loader)" in legend
    assert any(text.startswith("steps not counted") for text in legend), legend
    spans = defaultdict(list)  # a collection per rank and kind of span
    for collection in fig.axes[0].collections:
        spans[collection.get_gid()].append(collection)
    for counted, gid in ((1, "wait_s:counted"), (0, "wait_s:uncounted")):
        rows = data[(data["counted"] == counted) & (data["wait_s"] > 0)]
        assert sum(len(c.get_paths()) for c in spans[gid]) == len(rows)
    assert {c.get_hatch() for c in spans["wait_s:uncounted"]} == {"////"}
    assert not any(c.get_hatch() for c in spans["wait_s:counted"])


def test_the_scaling_plot_draws_the_demand_at_the_au_floor(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rs = _set(root, "train")
    figures = _drawn(monkeypatch)
    assert scaling.scaling(rs, tmp_path).path == tmp_path / "scaling.png"
    fig = figures["scaling"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(text.startswith("demand at the AU floor") for text in legend), legend
    row = rs.table.iloc[0]
    per_rank = row["batch"] * row["au_floor"] / row["compute_s_per_batch"]  # 2 x 0.9 / 0.002
    demand = [line for line in fig.axes[1].lines if line.get_linestyle() == "-."]
    assert len(demand) == 1
    assert list(demand[0].get_xdata()) == [1, 2]
    assert list(demand[0].get_ydata()) == pytest.approx([per_rank, 2 * per_rank])
    assert len([line for line in fig.axes[2].lines if line.get_linestyle() == "-."]) == 1


def test_the_checkpoint_figure_is_bars_named_by_short_labels(
        root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 49: single dots on an x axis of 0.945..1.050, legends such as "write:
    keep=False; workload=llama3_8b, num_checkpoints_read=0". Now a write and a read bar per
    run (their checkpoints' mean GB/s, each checkpoint a dot), the runs along the x axis by
    their labels, a legend of three short entries."""
    from dliobench.report.plots import checkpoints

    rs = _set(root, "ckpt_runs")
    figures = _drawn(monkeypatch)
    assert checkpoints.checkpoints(rs, tmp_path).path is not None
    ax = figures["checkpoints"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(rs.table["label"])
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == [
        "one checkpoint", "read: mean", "write: mean"]
    bars = [p.get_height() for p in ax.patches]
    means = [float(np.mean([c["aggregate_bytes_per_s"] / 1e9 for c in
                            run.result["checkpoint"][op]["checkpoints"]]))
             for op in ("write", "read") for run in rs.runs]
    assert bars == pytest.approx(means)
    low, high = ax.get_xlim()
    assert high - low > len(rs.runs) - 0.5  # a slot per run, not a sliver around x = 1


def test_the_first_section_answers_checkpoint_runs_by_their_rates(root: Path) -> None:
    """Checkpoint-only runs have no AU floor: their answer is the fastest write and its read,
    printed as the runs table prints them, and where their reads came from."""
    from dliobench.report.answers import answers

    rs = _set(root, "ckpt_runs")
    [answer] = answers(rs)
    best = rs.table.loc[rs.table["ckpt_write_gb_per_s"].idxmax()]
    assert answer.workload == "llama3_8b" and answer.about == "2 runs"
    assert answer.sustained.startswith(f"checkpoint write {best['ckpt_write_gb_per_s']:,.3f} "
                                       f"GB/s, read {best['ckpt_read_gb_per_s']:,.3f} GB/s "
                                       f"({best['label']}; the fastest write of 2 runs)")
    assert answer.limited.startswith("not judged: a checkpoint-only run has no AU floor")
    assert answer.evidence == (f"{best['label']}: reads from storage: "
                               f"{best['reads_from_storage']}",)
