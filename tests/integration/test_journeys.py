"""MLPerf Storage v3.0's own documented commands, typed as its users type them (issue 50).

The commands are test data: tests/data/mlpstorage_commands.yaml, each read from
mlcommons/storage's documentation with its path@commit and line. Each runs here with
``mlpstorage`` replaced by ``dliobench`` and only the substitutions listed beside it (sizes,
paths into the test's folder, other hosts -> this host), and must end as listed: it runs
(exit 0; a ``run`` entry to the end, a ``what-if`` entry to its resolved configuration), or
it is refused with one sentence (exit 2). Then the documents' procedures: datasize, datagen,
and the warm-up plus five runs; the launch of the ranks (4 ranks of the README's U-Net3D
run, the MPI options, signals forwarded).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dliobench.cli import mlpstorage_args
from dliobench.cli.main import main

REPO = Path(__file__).resolve().parents[2]
DATA = yaml.safe_load((REPO / "tests" / "data" / "mlpstorage_commands.yaml").read_text())
ENTRIES: list[dict[str, Any]] = DATA["commands"]
STATUSES = ("runs", "refused", "cannot run here")
TESTS = ("run", "what-if", "help", "refused", "none")
# how the documents start a command, and ours
PROGRAMS = ((("uv", "run", "mlpstorage"), ()), (("mlpstorage",), ()),
            (("python3", "kv-cache.py"), ("kvcache",)), (("python", "kv-cache.py"), ("kvcache",)),
            (("kv-cache",), ("kvcache",)), (("mlperf-kv-cache",), ("kvcache",)))
LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "PMIX_SIZE", "PMIX_RANK", "WORLD_SIZE", "RANK", "SLURM_STEP_ID", "SLURM_PROCID")
STAMP_LEN = len("20261207_104222")


def ident(entry: dict[str, Any]) -> str:
    return f"{entry['doc']}:{entry['line']}"


def argv_of(entry: dict[str, Any], tmp: Path) -> list[str]:
    """The entry's command as dliobench's argv: the program replaced, then only the listed
    substitutions (tokens replaced, sizes appended)."""
    text = entry.get("argv") or entry["command"]
    words = shlex.split(text.replace("\\\n", " "))
    for theirs, ours in PROGRAMS:
        if tuple(words[:len(theirs)]) == theirs:
            words = [*ours, *words[len(theirs):]]
            break
    else:
        raise AssertionError(f"{ident(entry)} starts with no mlpstorage program: {text}")
    subs = {k: v.format(tmp=tmp, repo=REPO) for k, v in (entry.get("replace") or {}).items()}
    words = [subs.get(w, w) for w in words]
    extra = [*DATA["sizes"][entry["size"]]] if entry.get("size") else []
    extra += entry.get("append") or []
    if extra:
        words += extra if any(w in ("--param", "--params", "-p") for w in words) else \
            ["--params", *extra]
    return words


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's folder as the user's: cwd, mlpstorage's default results folder, no
    launcher around, and this tree for ranks started here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(mlpstorage_args, "DEFAULT_RESULTS_DIR", str(tmp_path / "default"))
    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return tmp_path


def dliobench(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``dliobench ARGV`` in this process: its exit status, stdout and stderr."""
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:  # --help, and argparse's own errors
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def with_env(entry: dict[str, Any], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry's ./.env, as its document says to write it."""
    values = {k: v.format(tmp=tmp) for k, v in (entry.get("dotenv") or {}).items()}
    for key in values:
        monkeypatch.delenv(key, raising=False)
    if values:
        (tmp / ".env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))


def test_every_document_and_command_has_a_status() -> None:
    assert set(DATA["documents"]) == {e["doc"] for e in ENTRIES} | {"Rules.md"}
    for entry in ENTRIES:
        assert entry["status"] in STATUSES and entry["test"] in TESTS, ident(entry)
        assert entry["status"] == "runs" or entry.get("why"), ident(entry)
        assert entry["command"].strip() and isinstance(entry["line"], int), ident(entry)
        if entry.get("argv"):  # the part run is the document's own words
            flat = " ".join(entry["command"].replace("\\\n", " ").split())
            assert " ".join(entry["argv"].split()) in flat, ident(entry)


def test_docs_table_lists_every_command_with_its_status() -> None:
    table = (REPO / "docs" / "mlpstorage.md").read_text()
    for entry in ENTRIES:
        assert f"| {entry['doc']}:{entry['line']} | " in table, ident(entry)
        row = table.split(f"| {entry['doc']}:{entry['line']} | ", 1)[1].split("\n", 1)[0]
        assert f"| {entry['status']} |" in row, ident(entry)


QUICK = [e for e in ENTRIES if e["test"] in ("help", "refused", "what-if")]


@pytest.mark.parametrize("entry", QUICK, ids=[ident(e) for e in QUICK])
def test_documented_command_ends_as_listed(entry: dict[str, Any], here: Path,
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with_env(entry, here, monkeypatch)
    argv = argv_of(entry, here)
    if entry["test"] == "help":
        rc, out, _ = dliobench(argv, capsys)
        assert rc == 0 and "usage:" in out, argv
        return
    if entry["test"] == "refused":
        rc, _, err = dliobench(argv, capsys)
        lines = [x for x in err.splitlines() if x.strip() and not x.startswith(("usage:", " "))]
        assert rc == 2 and len(lines) == 1, (argv, err)
        return
    rc, out, err = dliobench([*argv, "--what-if"], capsys)
    assert rc == 0, (argv, err)
    config = yaml.safe_load(out)
    for key, value in (entry.get("expect") or {}).items():
        section, name = key.split(".")
        assert config[section][name] == value, (key, config[section])
    assert not list(here.glob("*/training/*/run/*"))  # nothing ran


def entry(section: str, start: str) -> dict[str, Any]:
    """The one entry of ``section`` whose command starts with ``start``."""
    found = [e for e in ENTRIES if e["section"] == section and
             e["command"].strip().startswith(start)]
    assert len(found) == 1, (section, start)
    return found[0]


def test_unet3d_procedure_datasize_datagen_warm_up_and_five_runs_reportgen(
        here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # training/README.md "unet3d": datasize, datagen, run; Submission_guidelines.md 6.6: a
    # warm-up before the 5 runs (Rules.md 2.1.17: 6 timestamp folders), then reportgen. The
    # six runs at 1 rank (the README's 4: test_readme_unet3d_run_starts_its_4_ranks).
    size = entry("unet3d", "mlpstorage training datasize")
    rc, out, _ = dliobench(argv_of(size, here), capsys)
    assert rc == 0 and "dataset.num_files_train=" in out
    gen = entry("unet3d", "mlpstorage training datagen")
    rc, out, err = dliobench(argv_of(gen, here), capsys)
    assert rc == 0, err
    assert len(list((here / "unet3d_data" / "unet3d").rglob("*.npz"))) == 32
    assert len(list((here / "unet3d_results" / "training" / "unet3d" / "datagen").iterdir())) == 1
    run = argv_of(entry("unet3d", "mlpstorage training run"), here)
    one = [("1" if w == "4" and run[i - 1] == "--num-accelerators" else w)
           for i, w in enumerate(run)]
    for _ in range(6):
        rc, out, err = dliobench(one, capsys)
        assert rc == 0, err
    runs = sorted((here / "unet3d_results" / "training" / "unet3d" / "run").iterdir())
    assert len(runs) == 6 and all(len(r.name) == STAMP_LEN for r in runs)
    for folder in runs:
        result = json.loads((folder / "result.json").read_text())
        assert result["status"] == "complete" and not result.get("generation")  # datagen's
    report = entry("unet3d", "mlpstorage reports reportgen")
    rc, _, err = dliobench([*argv_of(report, here), "--output-dir", str(here / "report")],
                           capsys)
    assert rc == 0, err
    assert (here / "report" / "report.html").is_file()


def test_readme_unet3d_run_starts_its_4_ranks(here: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # item 3: no launcher around, --num-accelerators 4 starts 4 ranks with the bundled
    # mpiexec (on ddfd37d: refused, with an mpiexec command to type)
    rc, _, err = dliobench(argv_of(entry("unet3d", "mlpstorage training run"), here), capsys)
    assert rc == 0, err
    (folder,) = (here / "unet3d_results" / "training" / "unet3d" / "run").iterdir()
    assert json.loads((folder / "result.json").read_text())["ranks_count"] == 4


RUNS = [e for e in ENTRIES if e["test"] == "run" and e["section"] != "unet3d"]


@pytest.mark.parametrize("entry", RUNS, ids=[ident(e) for e in RUNS])
def test_documented_command_runs(entry: dict[str, Any], here: Path,
                                 capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with_env(entry, here, monkeypatch)
    argv = argv_of(entry, here)
    rc, out, err = dliobench(argv, capsys)
    assert rc == 0, (argv, err)
    if argv[:2] == ["training", "datagen"] or "datagen" in argv[:4]:
        assert "wrote" in out or "files" in out
    written = list(here.rglob("result.json"))
    if "run" in argv[:4] or argv[:1] == ["kvcache"]:
        assert written, (argv, out)


def test_mpi_options_are_honoured_by_the_launch(here: Path, capsys: pytest.CaptureFixture[str],
                                                caplog: pytest.LogCaptureFixture) -> None:
    # item 1: each exited 2 on ddfd37d; here they are options of the mpiexec that starts
    # the ranks (--mpi-params verbatim on its command line, Hydra's mpirun picked)
    caplog.set_level(logging.INFO, logger="dliobench")
    size = DATA["sizes"]["unet3d"]
    rc, _, err = dliobench(["training", "run", "--model", "unet3d", "--num-accelerators", "2",
                            "--allow-run-as-root", "--oversubscribe", "--mpi-bin", "mpirun",
                            "--mpi-params=-genv DLIOBENCH_JOURNEY=1", "--mpi-btl", "tcp",
                            "--results-dir", "r", "--params", *size], capsys)
    assert rc == 0, err
    said = " ".join(caplog.text.split())
    assert "mpirun -genv DLIOBENCH_JOURNEY=1 -n 2" in said, said
    (folder,) = (here / "r" / "training" / "unet3d" / "run").iterdir()
    assert json.loads((folder / "result.json").read_text())["ranks_count"] == 2


def test_front_door_forms_that_were_refused(here: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # item 2, each refused or argparse's "invalid choice" on ddfd37d
    rc, out, err = dliobench(["training", "run", "--model", "unet3d", "--checkpoint-folder",
                              "ck", "--num-accelerators", "4", "--what-if"], capsys)
    assert rc == 0, err
    assert yaml.safe_load(out)["checkpoint"]["checkpoint_folder"] == "ck/unet3d"
    # the newest CLI's shape and flags (training_args.py@36dcedf): division first, model and
    # storage as words, -at, --o-direct, --systemname, --drop-caches-timeout-seconds
    rc, out, err = dliobench(["closed", "training", "unet3d", "configview", "file", "-at", "b200",
                              "--o-direct", "-sn", "sys1", "--drop-caches-timeout-seconds",
                              "30", "--num-accelerators", "4", "--results-dir", "r"], capsys)
    config = yaml.safe_load(out)
    assert rc == 0 and config["reader"]["odirect"] is True, err
    assert config["train"]["accelerator"] == "b200"
    for words, says in ((["history", "show"], "result.json"),
                        (["mlpstorage", "vectordb", "run"], "there is no index"),
                        (["closed", "vectordb", "run", "--num-shards", "1"], "no index"),
                        (["mlpstorage", "submit"], "dliobench check")):
        rc, _, err = dliobench(words, capsys)
        assert rc == 2 and says in err and len(err.strip().splitlines()) == 1, (words, err)
    rc, out, _ = dliobench(["mlpstorage", "kvcache", "datasize", "--model", "llama3.1-8b",
                            "--num-users", "10"], capsys)
    assert rc == 0 and "131,072 bytes" in out  # 2 x 32 layers x 8 KV heads x 128 x 2 bytes
    rc, _, err = dliobench(["kvcache", "run", "--results-dir", "kv", "--model", "tiny-1b",
                            "--num-users", "2", "--duration", "0.5", "--cache-dir", "c"],
                           capsys)
    assert rc == 0, err
    assert list((here / "kv").glob("*/result.json"))
    rc, out, _ = dliobench(["mlpstorage", "kvcache", "validate", "--results-dir", "kv"], capsys)
    assert rc in (0, 1) and "passed" in out  # `check`'s verdict on the run
    monkeypatch.delenv("BUCKET", raising=False)
    rc, _, err = dliobench(["training", "run", "--model", "unet3d", "--object",
                            "--what-if"], capsys)
    assert rc == 2 and "BUCKET" in err and len(err.strip().splitlines()) == 1


def test_the_launch_forwards_sigterm_and_exits_with_the_ranks_status(here: Path) -> None:
    # item 3: `dliobench run --ranks 2` started here; SIGTERM to it reaches both ranks,
    # which write what they measured and end; it exits 128 + SIGTERM
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dliobench", "run", "unet3d", "--ranks", "2", "-y",
         "--output", "out", *DATA["sizes"]["unet3d_4"], "train.epochs=1000"],
        cwd=here, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(here.glob("out/*/journal/rank-*.jsonl"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    (result,) = here.glob("out/*/result.json")
    assert json.loads(result.read_text())["status"] == "partial"


def test_without_the_mpi_extra_one_sentence_names_the_install() -> None:
    from dliobench.base.errors import InputError
    from dliobench.comm import local_launch

    with pytest.raises(InputError, match=r"pip install 'dliobench\[mpi\]'") as caught:
        local_launch.run(2, ["--version"], local_launch.MpiOptions(mpi_bin="mpiexec-absent"))
    assert "\n" not in str(caught.value)
