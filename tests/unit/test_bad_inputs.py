"""Bad input of every kind ends with one sentence naming what is wrong, and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.config.yamlfile import MAX_FILE_BYTES

Refused = Callable[..., str]


@pytest.fixture
def refused(run_cli: Callable[..., int], capsys: pytest.CaptureFixture[str]) -> Refused:
    """Run the CLI in-process; assert exit code 2 and one error line; return that line."""

    def run(*argv: str) -> str:
        capsys.readouterr()
        try:
            code = run_cli(*argv)
        except SystemExit as exc:  # argparse's own errors
            code = int(exc.code or 0)
        err = capsys.readouterr().err
        assert code == 2, err
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        if lines[0].startswith("usage:"):  # argparse: usage, then the sentence
            lines = [ln for ln in lines if "error:" in ln]
        assert len(lines) == 1, err
        return lines[0]

    return run


@pytest.mark.parametrize("override", ["train.seed=-1", "dataset.generation_seed=-7",
                                      "checkpoint.steps_between_checkpoints=-2",
                                      "dataset.num_files_train=99999999999999999999999",
                                      "dataset.record_length_bytes=1e400",
                                      "reader.batch_size={a: 1}", "train.epochs=[1, 2]"])
def test_numbers_out_of_range_or_of_the_wrong_kind(refused: Refused, override: str) -> None:
    assert override.split("=")[0] in refused("show-config", override)


@pytest.mark.parametrize("override", ["dataset.file_prefix=a/b", "dataset.file_prefix=..",
                                      'dataset.file_prefix="a\\0b"', 'output.label="x\\0"'])
def test_names_that_would_make_folders_or_hold_nul(refused: Refused, override: str) -> None:
    assert override.split("=")[0] in refused("show-config", override)


@pytest.mark.parametrize("name", ["dataset.data_folder", "output.folder",
                                  "checkpoint.checkpoint_folder"])
def test_empty_folders_are_refused(refused: Refused, name: str) -> None:
    assert f"{name} is empty" in refused("show-config", f"{name}=")


def test_empty_optional_folders_mean_off(run_cli: Callable[..., int]) -> None:
    assert run_cli("show-config", "storage.stage_to=", "storage.storage_root=") == 0


def test_empty_cli_folders_are_refused(refused: Refused) -> None:
    assert "--output" in refused("run", "--output", "")
    assert "-o/--out" in refused("report", "x", "-o", "")


@pytest.mark.parametrize(("text", "needle"), [
    (b"dataset:\n  name: \xff\xfe\n", "is not UTF-8 text (byte 17 on line 2)"),
    (b"- a\n- b\n", "must be a YAML mapping"),
    (b"42\n", "must be a YAML mapping"),
    (b"train: [1, 2]\n", "section 'train'"),
    (b"workflow: yes\n", "section 'workflow'"),
    (b"dataset:\n  num_files_train: 2\nreader: {}\ndataset:\n  format: npy\n",
     "key 'dataset' is given twice, at lines 1 and 4"),
    (b"train:\n  epochs: 1\n  epochs: 2\n", "key 'epochs' is given twice, at lines 2 and 3"),
    (b"dataset: {format: [unclosed\n", "is not valid YAML at line 2"),
    (b"dataset: {a: \x00}\n", "control character"),
    (b"a: &a [*a]\n", "aliases"),
    (b"# only a comment\n", "is empty"),
])
def test_defective_workload_files(workdir: Path, refused: Refused, text: bytes,
                                  needle: str) -> None:
    (workdir / "w.yaml").write_bytes(text)
    line = refused("show-config", "w.yaml")
    assert needle in line and "w.yaml" in line


def test_an_alias_bomb_is_refused_at_once(workdir: Path) -> None:
    rows = ['  a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    rows += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (workdir / "bomb.yaml").write_text("profiling:\n" + "\n".join(rows) + "\n")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dliobench", "show-config", "bomb.yaml"],
                          capture_output=True, text=True, timeout=60)  # expected: < 3 s
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "bomb.yaml: its aliases" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert time.monotonic() - started < 30


def test_a_file_too_large_to_be_a_workload(workdir: Path, refused: Refused) -> None:
    (workdir / "big.yaml").write_text("# " + "x" * MAX_FILE_BYTES + "\n")
    assert "big.yaml is larger than 1 MiB" in refused("show-config", "big.yaml")


@pytest.mark.parametrize(("text", "needle"), [
    ("workload: w.yaml\naxes: {ranks: [1\n", "sweep file s.yaml is not valid YAML at line 3"),
    ("workload: w.yaml\nworkload: w.yaml\n", "key 'workload' is given twice"),
    ("- workload\n", "must be a YAML mapping"),
    ("workload: w.yaml\naxes: {ranks: [0, 2]}\n", "axes.ranks must list positive"),
    ("workload: w.yaml\noverrides: train.epochs=2\n", "overrides must be a list"),
    ("workload: w.yaml\naxes: {1: [2]}\n", "axes must map keys"),
])
def test_defective_sweep_files(workdir: Path, refused: Refused, text: str,
                               needle: str) -> None:
    (workdir / "w.yaml").write_text("train: {epochs: 1}\n")
    (workdir / "s.yaml").write_text(text)
    assert needle in refused("sweep", "s.yaml", "--dry-run")


def test_checkpoints_need_a_model_size_or_a_layout(refused: Refused) -> None:
    assert "model.model_size_bytes is 0" in refused("show-config", "workflow.checkpoint=true")
    assert "hidden_size or vocab_size is 0" in refused(
        "show-config", "workflow.checkpoint=true", "model.num_layers=4")
    assert "checkpoint.scale must be above 0" in refused(
        "show-config", "workflow.checkpoint=true", "model.model_size_bytes=1MB",
        "checkpoint.scale=0")
    # the checkpoint-only workflow writes a layout: without one it wrote nothing and ended in
    # a ZeroDivisionError traceback (bad_inputs.py "workload checkpoint without training")
    assert "checkpoint-only workflow, which writes a transformer's layout, but " \
        "model.num_layers is 0" in refused("run", "workflow.checkpoint=true",
                                           "workflow.train=false", "model.model_size_bytes=1000")


@pytest.mark.parametrize("argv", [
    ("datasize", "--accelerators", "-3"), ("datasize", "--accelerators", "0"),
    ("datasize", "--hosts", "x"), ("datasize", "--host-memory-gb", "-1"),
    ("datasize", "--host-memory-gb", "inf"), ("datasize", "--host-memory-gb", "1e300"),
    ("datasize", "--accelerators", "10" * 20), ("sweep", "w", "--max-accelerators", "0"),
    ("sweep", "w", "--timeout", "-5"),
])
def test_cli_numbers_must_be_positive(refused: Refused, argv: tuple[str, ...]) -> None:
    assert argv[-2] in refused(*argv)


@pytest.mark.parametrize(("content", "needle"), [
    ("{}", "is not a dliobench result"),
    ("", "cannot be read"),
    ('{"schema_version": 1, "run_id": "x", "st', "cannot be read"),
    ('{"schema_version": 9, "run_id": "x", "status": "complete", "metrics": {}, "config": {}}',
     "has result schema 9"),
    ('{"schema_version": 1, "run_id": "x", "status": "complete", "metrics": [], "config": {}}',
     "metrics is [], where an object belongs"),
])
def test_report_refuses_what_is_not_a_result(workdir: Path, refused: Refused, content: str,
                                             needle: str) -> None:
    (workdir / "run").mkdir()
    (workdir / "run" / "result.json").write_text(content)
    for given in ("run", "run/result.json", "."):
        line = refused("report", given, "-o", "out")
        assert needle in line and "result.json" in line


def test_report_of_a_foreign_file_or_a_missing_folder(workdir: Path, refused: Refused) -> None:
    (workdir / "notes.json").write_text(json.dumps({"a": 1}))
    assert "notes.json: a file, not a folder" in refused("report", "notes.json")
    assert "nope: no such folder" in refused("report", "nope")
