"""Run sets: ``dliobench run --repeat N`` runs a warm-up and N scored runs in one invocation,
each a run folder whose result says its place in the set, with a set document beside them
that ``dliobench check`` agrees with; the checkpointing split form (a write-only invocation,
then a read-only one) times its gap; a set stopped by SIGTERM keeps its finished runs and
says how far it got (MLPerf Storage Rules.md §2.1.17, §4.7.1)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dliobench.cli.main import main
from dliobench.results.schema import SCHEMA_VERSION

TINY = ["dataset.num_files_train=8", "dataset.record_length_bytes=4096",
        "dataset.record_length_bytes_stdev=0", "train.epochs=1", "train.computation_time=0",
        "--no-progress"]
PRESET = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
CKPT = ["checkpoint.scale=0.0001", "checkpoint.time_between_checkpoints=0",
        "checkpoint.checkpoint_folder=ckpt", "checkpoint.file_format=raw", "--no-progress"]
Doc = dict[str, Any]


def set_document(folder: Path) -> Doc:
    """The one set document in ``folder``."""
    (path,) = folder.glob("runset-*.json")
    doc: Doc = json.loads(path.read_text())
    return doc


def results(folder: Path) -> list[Doc]:
    """The results below ``folder``, in their set's order."""
    docs = [json.loads(p.read_text()) for p in folder.glob("*/result.json")]
    return sorted(docs, key=lambda d: d["run_set"]["index"])


def findings(capsys: pytest.CaptureFixture[str], *folders: Path) -> dict[str, Doc]:
    """`dliobench check --json` on the folders: {check: finding} of the set checks."""
    capsys.readouterr()
    main(["check", "--json", *map(str, folders)])
    doc = json.loads(capsys.readouterr().out)
    return {f["check"]: f for f in doc["findings"] if f["subject"].count(",") == 1}


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real `dliobench run --repeat 2` of the default workload, tiny: its output folder
    and what it printed."""
    root = tmp_path_factory.mktemp("set")
    capture = subprocess.run(  # a process of its own: the console writes to its stdout
        [sys.executable, "-m", "dliobench", "run", "--repeat", "2", "--output",
         str(root / "out"), f"dataset.data_folder={root / 'data'}", *TINY],
        capture_output=True, text=True, timeout=120)
    assert capture.returncode == 0, capture.stderr
    return root / "out", capture.stdout


def test_repeat_runs_a_warmup_then_the_scored_runs(tiny_set: tuple[Path, str]) -> None:
    out, printed = tiny_set
    doc, runs = set_document(out), results(out)
    assert [r["run_set"]["warmup"] for r in runs] == [True, False, False]
    assert {r["run_set"]["set_id"] for r in runs} == {doc["set_id"]}
    assert {r["run_set"]["count"] for r in runs} == {3}
    assert runs[0]["schema_version"] == SCHEMA_VERSION
    assert [r["config"]["train"]["seed"] for r in runs] == [123, 124, 125]  # §6.6.3
    assert ["generation" in r for r in runs] == [True, False, False]  # generated once
    assert doc["state"] == "complete" and doc["finished"] == doc["planned"] == 3
    rates = [r["metrics"]["samples_per_s"] for r in runs[1:]]
    assert doc["scored"]["count"] == 2
    assert doc["scored"]["samples_per_s_mean"] == pytest.approx(sum(rates) / 2)
    assert doc["scored"]["samples_per_s_stdev"] == pytest.approx(abs(rates[0] - rates[1])
                                                                 / 2 ** 0.5)
    verdict = {f["check"]: f["status"] for f in doc["verdict"]}
    assert verdict == {"run count": "fail", "warm-up": "pass", "run spread": verdict[
        "run spread"], "consecutive": verdict["consecutive"]}
    assert "warm-up" in printed and "2 scored run(s): AU" in printed
    assert "fail run count: 2 complete run(s) besides 1 warm-up run(s)" in printed


def test_check_judges_the_set_without_its_warmup(tiny_set: tuple[Path, str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = tiny_set
    found = findings(capsys, out)
    assert found["run count"]["status"] == "fail"
    assert found["run count"]["sentence"].startswith("2 complete run(s) besides 1 warm-up")
    assert found["run count"]["fixes"][0]["have"] == "2"
    assert found["warm-up"]["status"] == "pass"
    assert "of 2 runs lie within" in found["run spread"]["sentence"]  # the warm-up left out
    scored = sorted(p.parent for p in out.glob("*/result.json"))
    warm = [p for p in scored if json.loads((p / "result.json").read_text())["run_set"][
        "warmup"]]
    found = findings(capsys, *[p for p in scored if p not in warm])
    assert found["warm-up"]["status"] == "fail"
    assert "no complete warm-up run precedes" in found["warm-up"]["sentence"]


def test_the_split_checkpoint_form_times_its_gap(workdir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(PRESET), "--run-set", *CKPT, "checkpoint.num_checkpoints_write=2",
                 "checkpoint.num_checkpoints_read=0", "output.folder=out"]) == 0
    assert sorted(p.name for p in (workdir / "ckpt/llama3_8b").iterdir()) == [
        "checkpoint-0000", "checkpoint-0001"]  # kept for the read invocation
    write = set_document(workdir / "out")
    assert main(["run", str(PRESET), "--run-set", *CKPT, "checkpoint.num_checkpoints_write=0",
                 "checkpoint.num_checkpoints_read=2", "output.folder=out"]) == 0
    (read,) = [r for r in results(workdir / "out") if r["run_set"]["phase"] == "read"]
    split = read["run_set"]["split"]
    assert read["run_set"]["phase"] == "read" and split["write_set_id"] == write["set_id"]
    assert 0 <= split["gap_s"] < 30 and split["limit_s"] == 30
    found = findings(capsys, workdir / "out")
    assert found["split gap"]["status"] == "pass"
    assert "timed by the read invocation from its command start" in found["split gap"][
        "sentence"]  # this test's process is older than the write set: main() was called
    assert found["run count"]["sentence"].startswith("2 write(s) and 2 read(s) over 2 complete")
    # the hand-off is §4.7.1's 30 s, not §2.1.24's "less than a run's duration" (under 1 s
    # for these tiny runs); the heading names the checkpointing rules, not training's
    assert found["consecutive"]["status"] == "n/a"
    assert "timed by the split gap check (Rules.md §4.7.1)" in found["consecutive"]["sentence"]
    main(["check", str(workdir / "out")])
    assert capsys.readouterr().out.splitlines()[0] == (
        "MLPerf Storage v3.0 rules, CLOSED division: checkpointing rules for 2 run(s)")
    # the same read invocation launched 31 s after the writes ended
    folder = next(p.parent for p in (workdir / "out").glob("*/result.json")
                  if json.loads(p.read_text())["run_set"]["phase"] == "read")
    late = json.loads((folder / "result.json").read_text())
    late["run_set"]["split"]["gap_s"] = 31.0
    (folder / "result.json").write_text(json.dumps(late))
    found = findings(capsys, workdir / "out")
    assert found["split gap"]["status"] == "fail"
    assert found["split gap"]["fixes"][0]["have"] == "31.0 s"
    late["run_set"]["split"]["gap_s"] = -2.0  # the read host's clock behind the write host's
    (folder / "result.json").write_text(json.dumps(late))
    found = findings(capsys, workdir / "out")
    assert found["split gap"]["status"] == "n/a" and "clock skew" in found["split gap"][
        "sentence"]


def test_a_set_that_cannot_be_run_is_one_sentence(workdir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--repeat", "0", *TINY])
    assert exit_.value.code == 2
    assert "0 is not allowed; give a whole number above 0" in capsys.readouterr().err
    assert main(["run", str(PRESET), "--repeat", "3", *CKPT,
                 "checkpoint.num_checkpoints_read=0"]) == 2
    err = capsys.readouterr().err
    assert ("--repeat 3 with a write-only checkpoint run: the split form is one write-only "
            "invocation then one read-only invocation") in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (workdir / "reports").exists() and not (workdir / "ckpt").exists()


def test_sigterm_mid_set_keeps_the_finished_runs(workdir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dliobench", "run", "--repeat", "5", "--output", "out",
         *TINY[:-2], "dataset.num_files_train=64", "train.computation_time=0.01",
         "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    documents = workdir / "out"
    deadline = time.monotonic() + 60  # a hang guard: the first run ends in about a second

    def finished() -> int:
        found = list(documents.glob("runset-*.json")) if documents.exists() else []
        return json.loads(found[0].read_text())["finished"] if found else 0

    while finished() < 1 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    doc = set_document(documents)
    assert doc["state"] == "interrupted" and doc["stopped_by"] == "terminated by SIGTERM"
    assert 1 <= doc["finished"] < doc["planned"] == 6
    for row in doc["runs"]:
        result = json.loads((documents / row["folder"] / "result.json").read_text())
        assert result["status"] == "complete" and result["run_set"]["index"] == row["index"]
