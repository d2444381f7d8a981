"""`dliobench check`: MLPerf Storage v3.0's training rules applied to results, each finding
naming its rule. A real run of the shipped unet3d (b200) at a tiny size is checked as it
is; the passing and failing sets are copies of its result.json edited to describe full-size
runs (a full-size unet3d run needs terabytes), their provenance hash stamped again as a run
would have written it."""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dliobench.cli.main import main
from dliobench.config.load import FIELDS
from dliobench.dataset.datasize import files_needed
from dliobench.report.rules.references import REFERENCES, Reference, reference
from dliobench.results.provenance import config_hash

TINY = ["dataset.num_files_train=35", "dataset.record_length_bytes=65536",
        "dataset.record_length_bytes_stdev=0", "train.epochs=1", "train.computation_time=0.02",
        "reader.read_threads=2"]  # read_threads: a parameter CLOSED may change
FULL_FILES = 100_000  # above 5x the memory of any test host in 146.6 MB files, and 3,500
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run of the shipped unet3d workload on b200, scaled down."""
    root = tmp_path_factory.mktemp("rules")
    assert main(["run", "unet3d", "--accelerator", "b200", "--no-progress", "--output",
                 str(root / "runs"), f"dataset.data_folder={root / 'data'}", *TINY]) == 0
    return next((root / "runs").iterdir())


def full_size(real: Doc, index: int) -> Doc:
    """The real result as run ``index`` of five full-size runs of one setup."""
    doc = copy.deepcopy(real)
    ref = reference("unet3d", "b200")
    assert ref is not None
    for key in ("dataset.record_length_bytes", "dataset.record_length_bytes_stdev",
                "train.epochs", "train.computation_time"):
        section, name = key.split(".")
        doc["config"][section][name] = ref[key]
    doc["config"]["dataset"]["num_files_train"] = FULL_FILES
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=index)
    doc.update(run_id=f"run-{index}", started_at=start.isoformat(),
               finished_at=(start + dt.timedelta(seconds=50)).isoformat())
    doc["metrics"].update(au=0.95, samples_per_s=40.0 * (1 + 0.01 * index))
    return doc


def as_set(real: Doc, docs: list[Doc]) -> list[Doc]:
    """``docs`` as the scored runs of a `dliobench run --run-set` set: a warm-up first, each
    run's place in ``run_set`` (Rules.md §2.1.17: the first of 6 runs is the warm-up)."""
    warmup = full_size(real, -1)
    out = [warmup, *docs]
    for index, doc in enumerate(out):
        doc["run_set"] = {"set_id": "set-0", "index": index, "count": len(out),
                          "warmup": index == 0, "phase": "training"}
    return out


def write_set(folder: Path, docs: list[Doc], stamp: bool = True) -> Path:
    """Write each document as a run folder below ``folder``, its config hash stamped."""
    for doc in docs:
        if stamp:
            doc["provenance"]["config_sha256"] = config_hash(doc["config"])
        (folder / doc["run_id"]).mkdir(parents=True)
        (folder / doc["run_id"] / "result.json").write_text(json.dumps(doc))
    return folder


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Doc]:
    """Run `dliobench check --json`; its exit code and document."""
    code = main(["check", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def by_check(doc: Doc) -> dict[tuple[str, str], Doc]:
    """{(check, subject): finding}."""
    return {(f["check"], f["subject"]): f for f in doc["findings"]}


def statuses(doc: Doc, status: str) -> set[tuple[str, str]]:
    return {(f["check"], f["subject"]) for f in doc["findings"] if f["status"] == status}


@pytest.fixture
def real(real_run: Path) -> Doc:
    doc: Doc = json.loads((real_run / "result.json").read_text())
    return doc


def test_the_real_tiny_run_fails_on_what_it_changed(real_run: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = check(capsys, str(real_run))
    found = {f["check"]: f for f in doc["findings"]}
    au = json.loads((real_run / "result.json").read_text())["metrics"]["au"]
    met = au >= 0.90  # the real AU: a busy test host may miss the floor
    assert found["AU floor"]["status"] == ("pass" if met else "fail")
    assert code == 1 and doc["failed"] == 3 + (not met)
    params = found["parameters"]
    assert params["status"] == "fail"
    assert params["rule"]["section"] == "§3.6.2 trainingClosedSubmissionParameters"
    assert params["rule"]["document"].startswith("mlcommons/storage Rules.md@0366ccfc")
    assert params["rule"]["against"] == ("mlcommons/storage configs/dlio/workload/"
                                         "unet3d_b200.yaml@0d75b41708cf30b991186aa58c53890cb3b7956e")
    for key in ("dataset.record_length_bytes = 65536 (unet3d_b200.yaml: 146600628)",
                "train.computation_time = 0.02 (unet3d_b200.yaml: 0.162)", "train.epochs = 1"):
        assert key in params["sentence"]
    assert "read_threads" not in params["sentence"]  # CLOSED may change it
    assert found["dataset size"]["status"] == "fail"
    # computed under the 146,600,628-byte records the parameters finding asks for, not the
    # run's 64 KiB ones (issue 49: "at least 482,106" files of the scaled-down record)
    memory = json.loads((real_run / "result.json").read_text())["machine"]["memory_bytes"]
    need = files_needed(146600628, 1, 7, 1, 1, memory).files
    assert found["dataset size"]["fixes"] == [
        {"key": "dataset.num_files_train", "need": f"at least {need:,}", "have": "35"}]
    assert "needed under unet3d_b200.yaml's record_length_bytes 146,600,628 (the run's " \
        "65,536 is not CLOSED's to change)" in found["dataset size"]["sentence"]
    assert found["run count"]["status"] == "fail"
    assert "1 complete run(s)" in found["run count"]["sentence"]
    assert {found[c]["status"] for c in ("complete", "workload", "accelerator",
                                         "provenance")} == {"pass"}
    assert found["run spread"]["status"] == found["consecutive"]["status"] == "n/a"


def test_a_passing_set(real: Doc, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [full_size(real, i) for i in range(5)]
    docs[0]["config"]["reader"]["odirect"] = True  # CLOSED may turn it on for unet3d
    folder = write_set(tmp_path / "pass", as_set(real, docs))
    code, doc = check(capsys, str(folder))
    assert code == 0 and doc["failed"] == 0 and doc["runs"] == 6
    assert statuses(doc, "fail") == set() and statuses(doc, "n/a") == set()
    assert len(doc["findings"]) == 6 * 9 + 4
    found = by_check(doc)
    setup = "unet3d, 1 b200 accelerator(s) on 1 host(s)"
    assert "5 complete run(s) besides 1 warm-up" in found[("run count", setup)]["sentence"]
    assert found[("warm-up", setup)]["sentence"].startswith("warm-up run--1 ran before the 5")
    assert "within 2.0 % of their mean" in found[("run spread", setup)]["sentence"]
    assert f"{FULL_FILES:,} files" in found[("dataset size", "run-0")]["sentence"]
    assert "AU 95.0 % is at or above the floor of unet3d_b200.yaml, 90.0 %" in \
        found[("AU floor", "run-0")]["sentence"]
    assert "changed from unet3d_b200.yaml (dataset.data_folder, dataset.num_files_train, " \
        "reader.odirect, reader.read_threads)" in found[("parameters", "run-0")]["sentence"]
    assert found[("O_DIRECT", "run-0")]["sentence"] == \
        "unet3d reads with O_DIRECT, which unet3d may"


def test_a_failing_set_names_each_rule(real: Doc, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    docs = [full_size(real, i) for i in range(5)]
    docs[0]["config"]["dataset"]["num_files_train"] = 100  # dataset too small
    docs[1]["metrics"]["au"] = 0.5  # below the floor
    docs[2]["config"]["reader"]["batch_size"] = 8  # a parameter CLOSED may not change
    code, doc = check(capsys, str(write_set(tmp_path / "fail", docs)))
    assert code == 1
    assert statuses(doc, "fail") == {("dataset size", "run-0"), ("AU floor", "run-1"),
                                     ("parameters", "run-2")}
    found = by_check(doc)
    small = found[("dataset size", "run-0")]
    assert small["rule"]["section"] == "§3.1.2 trainingRecalculateDatasetSize"
    assert small["sentence"].startswith("100 files (14.66 GB) is short of the ")
    low = found[("AU floor", "run-1")]
    assert low["rule"]["section"] == "§3.3.2 trainingAcceleratorUtilizationCheck"
    assert "AU 50.0 % is below the floor of unet3d_b200.yaml, 90.0 %" in low["sentence"]
    changed = found[("parameters", "run-2")]
    assert changed["sentence"] == \
        "CLOSED may not change reader.batch_size = 8 (unet3d_b200.yaml: 7)"
    assert changed["fixes"] == [{"key": "reader.batch_size", "need": "7", "have": "8"}]


def test_the_table_names_rules_and_documents(real: Doc, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # rows unfolded, so the test can find them
    docs = [full_size(real, i) for i in range(5)]
    docs[1]["metrics"]["au"] = 0.5
    folder = write_set(tmp_path / "t", as_set(real, docs))
    assert main(["check", str(folder)]) == 1
    short = capsys.readouterr().out
    assert "Details" not in short and "Rules.md: " not in short  # the table: --details only
    assert short.splitlines()[-1] == ("57 passed, 1 failed, 0 not applicable: FAILS the rules "
                                      "(--details lists every finding and its rule)")
    assert main(["check", "--details", str(folder)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "MLPerf Storage v3.0 rules, CLOSED division: training rules for 6 run(s)"
    assert lines[1:4] == [
        "CLOSED-ready: no (1 of 58 findings fail)",
        "What to change (key: value the rules need):",
        "  - AU (storage fast enough for the accelerators emulated): at least 90.0 % "
        "(has 50.0 %)  [AU floor; run-1]"]
    assert lines[4].startswith("Details")
    assert "trainingAcceleratorUtilizationCheck" in out and "fail" in out
    assert "Rules.md: mlcommons/storage Rules.md@0366ccfc9fc629dde3379a8022cb4c4ff8285b53" in out
    assert "57 passed, 1 failed, 0 not applicable: FAILS the rules" in out


@pytest.mark.parametrize(("edit", "failing", "needle"), [
    (lambda d: d["config"]["train"].update(accelerator="h100", computation_time=0.323),
     "accelerator", "h100 (named by train.accelerator) is whatif only, not submittable"),
    (lambda d: d["config"]["reader"].update(data_loader="native"), "parameters",
     "(reader.data_loader: OPEN only)"),
    (lambda d: d["config"]["storage"].update(stage_to="/local"), "parameters",
     "storage.stage_to = '/local' (unet3d_b200.yaml: '')"),
    (lambda d: (d.update(workload="retinanet"), d["config"]["reader"].update(odirect=True)),
     "O_DIRECT", "retinanet reads with O_DIRECT, which only unet3d may"),
    (lambda d: d.update(status="partial", errors=["rank 0: disk gone"]), "complete",
     "is partial: it ended early (rank 0: disk gone)"),
    (lambda d: d["honesty"].update(data_origin="the user's own files in /x, read as found"),
     "data origin", "the run read the user's own files; a submission reads the data"),
])
def test_one_run_of_five_breaking_one_rule(real: Doc, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str],
                                           edit: Callable[[Doc], None], failing: str,
                                           needle: str) -> None:
    docs = [full_size(real, i) for i in range(5)]
    edit(docs[3])
    code, doc = check(capsys, str(write_set(tmp_path / "one", docs)))
    failed = [f for f in doc["findings"] if f["status"] == "fail"]
    assert code == 1 and {f["check"] for f in failed} >= {failing}
    assert any(needle in f["sentence"] for f in failed if f["check"] == failing)


def test_a_folder_is_judged_by_its_sets_and_names_what_it_skips(
        real: Doc, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`make run`'s default run beside five unet3d runs is skipped and named, not judged;
    named by its folder it is judged; alone in a folder, nothing is judged: one sentence."""
    docs = [full_size(real, i) for i in range(5)]
    lone = full_size(real, 9)
    lone.update(workload="default", run_id="make-run")
    folder = write_set(tmp_path / "reports", [*docs, lone])
    code, doc = check(capsys, str(folder))
    assert code == 0 and doc["runs"] == 5 and doc["families"] == {"training": 5}
    assert doc["skipped"] == [{"run_id": "make-run", "folder": str(folder / "make-run"),
                               "workload": "default"}]
    assert not any(f["subject"] == "make-run" for f in doc["findings"])
    main(["check", str(folder)])
    assert capsys.readouterr().out.splitlines()[1] == (
        "Skipped 1 run(s) in no run set, of a workload no MLPerf Storage rule defines: "
        "make-run (default); name a run's folder to check it")
    code, doc = check(capsys, str(folder / "make-run"))
    assert code == 1 and doc["skipped"] == [] and doc["runs"] == 1
    alone = write_set(tmp_path / "alone", [lone])
    assert main(["check", str(alone)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"dliobench: error: {alone} holds no run set and no run of a workload "
                   "MLPerf Storage's rules define (skipped make-run (default)); name a run's "
                   "folder to check that run anyway")


def test_open_division_allows_the_loader(real: Doc, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    docs = [full_size(real, i) for i in range(5)]
    for d in docs:
        d["config"]["reader"]["data_loader"] = "native"
    folder = write_set(tmp_path / "open", docs)
    assert check(capsys, str(folder))[0] == 1
    code, doc = check(capsys, "--division", "open", str(folder))
    assert code == 0 and doc["division"] == "open"
    assert by_check(doc)[("parameters", "run-0")]["rule"]["section"] == \
        "§3.6.3 trainingOpenSubmissionParameters"


@pytest.mark.parametrize(("edit", "failing", "needle"), [
    (lambda docs: docs[4]["metrics"].update(samples_per_s=60.0), "run spread",
     "within 34.9 % of their mean 44.5"),
    (lambda docs: docs[4].update(started_at="2026-01-02T00:00:00+00:00",
                                 finished_at="2026-01-02T00:00:50+00:00"), "consecutive",
     "the widest gap between runs is 86,170 s, not less than the shortest run (50 s)"),
])
def test_runs_that_are_not_repeats(real: Doc, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str],
                                   edit: Callable[[list[Doc]], None], failing: str,
                                   needle: str) -> None:
    docs = [full_size(real, i) for i in range(5)]
    edit(docs)
    code, doc = check(capsys, str(write_set(tmp_path / "set", docs)))
    failed = [f for f in doc["findings"] if f["status"] == "fail"]
    assert code == 1 and [f["check"] for f in failed] == [failing]
    assert needle in failed[0]["sentence"]


def test_an_edited_result_and_an_old_one(real: Doc, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    edited = full_size(real, 0)  # its config changed, its stamp left as the run wrote it
    old = full_size(real, 1)
    old["schema_version"] = "1.1"
    del old["provenance"]
    write_set(tmp_path / "runs", [old], stamp=False)
    write_set(tmp_path / "runs", [edited], stamp=False)
    code, doc = check(capsys, str(tmp_path / "runs"))
    found = by_check(doc)
    assert code == 1 and found[("provenance", "run-0")]["status"] == "fail"
    assert "edited after the run" in found[("provenance", "run-0")]["sentence"]
    assert found[("provenance", "run-1")]["status"] == "n/a"
    assert "schema 1.1" in found[("provenance", "run-1")]["sentence"]


def test_bad_input_is_one_sentence_and_exit_2(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"dliobench: error: {tmp_path / 'missing'}: no such folder; give run "
                   "folders (with a result.json) or folders that contain them")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "result.json").write_text('{"a": 1}')
    assert main(["check", str(tmp_path / "junk")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a dliobench result" in err and "\n" not in err


def test_a_result_without_what_the_rules_read_is_refused(
        real: Doc, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = full_size(real, 0)
    del doc["config"]["reader"]["batch_size"]
    folder = write_set(tmp_path / "bad", [doc])
    assert main(["check", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"dliobench: error: {folder / 'run-0' / 'result.json'} lacks "
                   "reader.batch_size as a run writes them, so the rules cannot be "
                   "applied to it; leave that folder out")
    doc["metrics"]["au"] = "high"  # a figure of the wrong type: refused on reading, as
    folder = write_set(tmp_path / "typed", [doc])  # every reader refuses it
    assert main(["check", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"dliobench: error: {folder / 'run-0' / 'result.json'}: metrics.au is "
                   '"high", where a number or null belongs, so it was edited or damaged after '
                   "the run wrote it; run it again, or leave that folder out")


# What a user scaling an upstream file down sets, and nothing else: fewer and smaller files
# (and, for retinanet, 1 epoch of its 8, to keep the test short: Rules.md §3.6.2 does not let
# CLOSED change train.epochs, so that finding is the rules' own). unet3d keeps its 5 epochs.
# workflow.generate_data: upstream generates in a separate datagen step; a harness key.
SCALED_DOWN = {
    "unet3d_b200.yaml": ["dataset.num_files_train=7", "dataset.record_length_bytes=64KiB",
                         "dataset.record_length_bytes_stdev=0",
                         "dataset.record_length_bytes_resize=64KiB"],
    "retinanet_b200.yaml": ["dataset.num_files_train=24", "dataset.record_length_bytes=16KiB",
                            "train.epochs=1"],
    "retinanet_mi355.yaml": ["dataset.num_files_train=32", "dataset.record_length_bytes=16KiB",
                             "train.epochs=1"],
}


@pytest.mark.parametrize("ref", REFERENCES, ids=lambda r: r.name)
def test_an_upstream_file_run_scaled_down_is_judged_on_what_the_user_changed(
        ref: Reference, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Upstream's own v3.0 file, run unchanged but scaled down: no finding names a key the
    file sets itself; the accelerator is inferred from its compute time."""
    scaled = SCALED_DOWN[ref.name]
    assert main(["run", str(ref.path), "--no-progress", "--output", str(tmp_path / "runs"),
                 f"dataset.data_folder={tmp_path / 'data'}", "workflow.generate_data=true",
                 *scaled]) == 0
    capsys.readouterr()  # the run's own report
    run = next((tmp_path / "runs").iterdir())
    user_set = {o.split("=")[0] for o in scaled}
    for division in ("closed", "open"):
        _, doc = check(capsys, "--division", division, str(run))
        found = {f["check"]: f for f in doc["findings"]}
        assert found["workload"]["status"] == found["accelerator"]["status"] == "pass"
        compute = ref_compute(ref)
        assert f"{ref.accelerator} (inferred: train.computation_time = {compute} s is " \
            f"{ref.name}'s)" in found["accelerator"]["sentence"]
        keys = {x["key"] for f in doc["findings"] for x in f["fixes"]}
        assert keys & set(FIELDS) <= user_set, keys  # none the upstream file set itself
        params = {x["key"] for x in found["parameters"]["fixes"]}
        assert params == user_set - {"dataset.num_files_train"}  # the one CLOSED may change
        assert found["parameters"]["rule"]["against"] == ref.citation
        assert found["AU floor"]["rule"]["against"] == ref.citation


def ref_compute(ref: Reference) -> float:
    """The compute time per batch the upstream file sets."""
    value = reference(ref.workload, ref.accelerator)
    assert value is not None
    return float(value["train.computation_time"])


def test_every_change_is_listed_and_a_passing_set_reads_ready(
        real: Doc, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is cut short ("and N more"): six forbidden changes give six checklist lines,
    each with the key and upstream's value; a warm-up and five good runs read CLOSED-ready:
    yes (the five alone: not known, as nothing says a warm-up came first)."""
    monkeypatch.setenv("COLUMNS", "250")
    docs = [full_size(real, i) for i in range(5)]
    assert main(["check", str(write_set(tmp_path / "five", docs))]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "CLOSED-ready: not known (1 check(s) could not be applied: warm-up)")
    docs = [full_size(real, i) for i in range(5)]
    assert main(["check", str(write_set(tmp_path / "good", as_set(real, docs)))]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "CLOSED-ready: yes (all 58 findings pass)"
    docs = [full_size(real, i) for i in range(5)]
    docs[0]["config"]["reader"].update(batch_size=8, data_loader="native", file_shuffle="off",
                                       sample_shuffle="off")
    docs[0]["config"]["train"].update(epochs=1)
    docs[0]["config"]["checkpoint"].update(checkpoint_after_epoch=1)
    code, doc = check(capsys, str(write_set(tmp_path / "six", docs)))
    wanted = {("checkpoint.checkpoint_after_epoch", "5"), ("reader.batch_size", "7"),
              ("reader.data_loader", "'pytorch' (OPEN may change it)"),
              ("reader.file_shuffle", "'seed'"), ("reader.sample_shuffle", "'seed'"),
              ("train.epochs", "5")}
    assert code == 1 and doc["ready"] is False
    assert {(c["key"], c["need"]) for c in doc["checklist"]} == wanted
    params = by_check(doc)[("parameters", "run-0")]["sentence"]
    assert "more" not in params and params.count("(unet3d_b200.yaml: ") == 6
