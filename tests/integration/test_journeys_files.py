"""Two of MLPerf Storage's documented procedures, typed as mlpstorage's users type them, and
the files upstream's submission checker then finds in every leaf of the results folder.

- The split checkpoint (Rules.md §4.7.1; mlcommons/storage ``checkpointing/README.md``): a
  write-only invocation, a cache clear, a read-only invocation, in mlpstorage's
  ``checkpointing run`` form, scaled down as tests/integration/test_mlpstorage_cli.py scales it.
- ``training datagen`` then ``training run``.

The required files are the submission checker's, mlcommons/storage
``mlpstorage_py/submission_checker/constants.py``@a815ef8a317e0b05a7cceea26fe0ae1a0eba2c94
(``DATAGEN_``, ``RUN_``, ``CHECKPOINT_REQUIRED_FILES`` and ``_FOLDERS``, v3.0; each pattern is
matched as ``checks/directory_checks.py`` and ``utils.py`` ``regex_matches_any``@a815ef8a match
it, ``re.search`` over the leaf's file names).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.test_mlpstorage_cli import CKPT_SIZE, TRAIN_SIZE

CHECKPOINT_REQUIRED = [r"checkpointing_run\.stdout\.log", r"checkpointing_run\.stderr\.log",
                       r".*output\.json", r".*per_epoch_stats\.json", r".*summary\.json",
                       r"dlio\.log"]
RUN_REQUIRED = [r"training_run\.stdout.log", r"training_run\.stderr.log", r".*output\.json",
                r".*per_epoch_stats\.json", r".*summary\.json", r"dlio\.log"]
DATAGEN_REQUIRED = [r"training_datagen\.stdout.log", r"training_datagen.stderr\.log",
                    r".*output\.json$", r".*per_epoch_stats\.json$", r".*summary\.json$",
                    r"dlio\.log"]
CKPT = ["checkpointing", "run", "--model", "llama3-8b", "--client-host-memory-in-gb", "512",
        "--num-processes", "1", "--checkpoint-folder", "ckpt", "--results-dir", "R"]


def leaf_holds(leaf: Path, patterns: list[str]) -> None:
    """Every required pattern matches a file of the leaf, and dlio_config/ has its three."""
    names = [p.name for p in leaf.iterdir() if p.is_file()]
    for pattern in patterns:
        assert any(re.search(pattern, n) for n in names), (pattern, names)
    assert {p.name for p in (leaf / "dlio_config").iterdir()} == {
        "config.yaml", "hydra.yaml", "overrides.yaml"}
    summary = json.loads((leaf / "summary.json").read_text())
    start = dt.datetime.fromisoformat(summary["start"])  # as the checker parses them
    assert dt.datetime.fromisoformat(summary["end"]) > start
    for name in names:
        if name.endswith(".json"):
            json.loads((leaf / name).read_text())


def drop_caches() -> None:
    """The procedure's cache clear, as upstream's documents give it (root only); elsewhere
    the read-only invocation's own eviction (checkpoint.evict_before_read) stands in."""
    os.sync()
    with contextlib.suppress(OSError):
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def test_split_checkpoint_procedure(run_cli: Callable[..., int], workdir: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = workdir / "ckpt" / "llama3-8b" / "llama3_8b"
    runs = workdir / "R" / "checkpointing" / "llama3-8b"
    assert run_cli(*CKPT, "--num-checkpoints-read", "0", "--num-checkpoints-write", "1",
                   "--param", *CKPT_SIZE) == 0
    assert "stay in" in capsys.readouterr().out  # the clean-up is said
    kept = sorted(p.name for p in (ckpt / "checkpoint-0000").iterdir())
    assert kept == ["zero_pp_rank_0_mp_rank_0_model_states.pt",
                    "zero_pp_rank_0_mp_rank_0_optim_states.pt"]
    drop_caches()
    # more checkpoints than were written: one sentence, before anything runs
    assert run_cli(*CKPT, "--num-checkpoints-read", "2", "--num-checkpoints-write", "0",
                   "--param", *CKPT_SIZE) == 2
    said = capsys.readouterr().err.strip()
    assert said.count("\n") == 0 and "checkpoint 1 lacks 2 of its 2 files" in said
    assert "--num-checkpoints-read 1" in said and len(list(runs.iterdir())) == 1
    assert run_cli(*CKPT, "--num-checkpoints-read", "1", "--num-checkpoints-write", "0",
                   "--param", *CKPT_SIZE) == 0
    assert "removed once read" in capsys.readouterr().out
    assert not ckpt.exists()  # the read-only invocation cleaned up
    write, read = sorted(runs.iterdir())
    for leaf in (write, read):
        leaf_holds(leaf, CHECKPOINT_REQUIRED)
    saved = json.loads((write / "summary.json").read_text())["metric"]
    loaded = json.loads((read / "summary.json").read_text())["metric"]
    assert "save_checkpoint_io_mean_GB_per_second" in saved and "load_" not in str(saved)
    assert "load_checkpoint_io_mean_GB_per_second" in loaded and "save_" not in str(loaded)
    stats = json.loads((read / "0_per_epoch_stats.json").read_text())
    assert stats["1"]["load_ckpt1"]["throughput"] == pytest.approx(
        loaded["load_checkpoint_io_mean_GB_per_second"])
    reportgen_writes_upstreams_files_and_verdicts(run_cli, workdir, capsys, [write, read])


def reportgen_writes_upstreams_files_and_verdicts(
        run_cli: Callable[..., int], workdir: Path, capsys: pytest.CaptureFixture[str],
        leaves: list[Path]) -> None:
    """``reports reportgen --results-dir R`` (mlpstorage's form): each run's category on the
    console, R/results.json and R/results.csv as upstream's ReportGenerator writes them
    (mlpstorage_py/report_generator.py@dfe7b1f9), and our HTML report; ``validate`` is our
    check of the same runs."""
    assert run_cli("reports", "reportgen", "--results-dir", "R", "--output-dir", "rep") == 0
    out = capsys.readouterr().out
    ids = [f"checkpointing_run_llama3-8b_{leaf.name}" for leaf in leaves]
    for run_id in ids:  # scaled down a ten-thousandth: not CLOSED (model: scaled)
        assert re.search(rf"^(OPEN|INVALID) +{run_id} ", out, re.M), out
    rows = json.loads((workdir / "R" / "results.json").read_text())
    assert sorted(r["run_id"] for r in rows) == ids
    assert {r["benchmark_type"] for r in rows} == {"checkpointing"}
    assert all(r["num_processes"] == 1 and r["metrics"] for r in rows)
    header = (workdir / "R" / "results.csv").read_text().splitlines()[0].split(",")
    assert header == sorted(header) and "metrics.checkpoint_size_GB" in header
    assert (workdir / "rep" / "report.html").is_file()
    assert run_cli("validate", "--results-dir", "R") == 1  # scaled down: fails the rules
    assert "FAILS the rules" in capsys.readouterr().out


def test_datagen_and_run_leaves_hold_what_the_checker_reads(
        run_cli: Callable[..., int], workdir: Path) -> None:
    common = ["--model", "unet3d", "--data-dir", "d", "--results-dir", "R"]
    assert run_cli("training", "datagen", *common, "--param", *TRAIN_SIZE) == 0
    assert run_cli("training", "run", *common, "--num-accelerators", "1",
                   "--accelerator-type", "b200", "--param", *TRAIN_SIZE) == 0
    model = workdir / "R" / "training" / "unet3d"
    (datagen,), (run,) = list((model / "datagen").iterdir()), list((model / "run").iterdir())
    leaf_holds(datagen, DATAGEN_REQUIRED)
    leaf_holds(run, RUN_REQUIRED)
    summary = json.loads((run / "summary.json").read_text())
    output = json.loads((run / "0_output.json").read_text())
    steps = [r for r in (run / "timeline.csv").read_text().splitlines()[1:]]
    assert len(output["1"]["proc"]["block1"]) == len(steps)
    assert output["1"]["au"]["block1"] == pytest.approx(
        summary["metric"]["train_au_percentage"][0])  # one rank: the rank's is the run's
    log = (run / "dlio.log").read_text()
    assert f"[METRIC] Number of Simulated Accelerators: {summary['num_accelerators']}" in log
    assert (run / "training_run.stdout.log").read_text() == log
    assert json.loads((datagen / "summary.json").read_text())["metric"] == {}
