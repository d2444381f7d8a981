"""Run mlpstorage's own tools on a results folder that dliobench made: its reportgen, and its
submission checker; count what they found and what they concluded, beside our ``check``.

Usage: python -m benchmarks.peers.mlpstorage_reportgen --upstream DIR [--checker DIR]
       [--python PY] [--keep]

DIR is a checkout of mlcommons/storage (docs/benchmarks.md says which commit and how): its
package ``mlpstorage`` (v2.0) or ``mlpstorage_py`` (v3.0) is run as is, with PY (a Python that
has the package's dependencies: pyyaml, psutil, pyarrow) and DIR on PYTHONPATH, as
``python -m <package>.main reports reportgen --results-dir R``. The submission checker is
``mlpstorage_py/submission_checker`` of ``--checker`` (default: DIR), run as
``python -m mlpstorage_py.submission_checker.main --input S --version v3.0`` on S, R's runs laid
out as a submission (``closed/dliobench/results/<host>/{training,checkpointing}/...`` and a
``closed/dliobench/systems/<host>.yaml`` naming this host); where the checkout lacks a module
it imports, the script says which. No upstream code is copied into this repository.

R is made in a scratch folder by mlpstorage's own command lines through dliobench's front
door, scaled down as tests/integration/test_mlpstorage_cli.py scales them: ``training
datagen`` then a training run set of ``--loops 6`` (unet3d, b200, 16 files of 64 KiB, one
epoch, our native loader), and the split checkpoint procedure (llama3-8b, a ten-thousandth of
every tensor): a write-only ``checkpointing run`` then a read-only one.
Printed: the run folders dliobench wrote, the runs reportgen found and its category
(CLOSED/OPEN/INVALID) for each, with the issues it gave; the checker's errors by kind
(missing files, parse failures, rule violations) and its verdict per workload beside our
check's. Exits 1 when reportgen fails or finds fewer runs than dliobench wrote, or when the
checker reports a missing file or a parse failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAIN = ["training", "run", "--hosts", "127.0.0.1", "--num-client-hosts", "1",
         "--client-host-memory-in-gb", "64", "--num-accelerators", "1", "--accelerator-type",
         "b200", "--model", "unet3d", "--data-dir", "d", "--results-dir", "R", "--loops", "6",
         "--param", "dataset.num_files_train=16", "dataset.record_length_bytes=65536",
         "dataset.record_length_bytes_stdev=0", "train.epochs=1", "reader.data_loader=native"]
DATAGEN = ["training", "datagen", "--model", "unet3d", "--data-dir", "d", "--results-dir", "R",
           "--param", *TRAIN[TRAIN.index("--param") + 1:]]
CKPT_BASE = ["checkpointing", "run", "--model", "llama3-8b", "--client-host-memory-in-gb", "512",
             "--num-processes", "1", "--checkpoint-folder", "ckpt", "--results-dir", "R",
             "--param", "checkpoint.scale=0.0001", "checkpoint.time_between_checkpoints=0",
             "checkpoint.file_format=raw"]
CKPT_WRITE = [*CKPT_BASE, "--num-checkpoints-read", "0", "--num-checkpoints-write", "1"]
CKPT_READ = [*CKPT_BASE, "--num-checkpoints-read", "1", "--num-checkpoints-write", "0"]
SUBMITTER = "dliobench"
# the submission checker's log: "[LEVEL] message" (main.py's logging format)
LOG_LINE = re.compile(r"^\[(ERROR|WARNING)\] (.*)$")
MISSING = re.compile(r"not found in|directory not found|could not find|does not exist",
                     re.IGNORECASE)
PARSE = re.compile(r"failed to parse|could not load|cannot parse|decode", re.IGNORECASE)
HEADER = re.compile(r"-+ (CLOSED|OPEN|INVALID) Report -+")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def dliobench(cwd: Path, argv: list[str]) -> None:
    """One mlpstorage command line through dliobench; stops the script when it fails."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "dliobench", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"dliobench {' '.join(argv[:2])} failed: {done.stderr.strip()[-500:]}")


def package_of(upstream: Path) -> str:
    """The report tool's package in the checkout (v3.0's name first)."""
    for name in ("mlpstorage_py", "mlpstorage"):
        if (upstream / name / "main.py").is_file():
            return name
    sys.exit(f"{upstream} holds neither mlpstorage_py/main.py nor mlpstorage/main.py; pass a "
             "checkout of mlcommons/storage as --upstream")


def reportgen(python: str, upstream: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``<package>.main reports reportgen --results-dir R`` from the checkout."""
    env = {**os.environ, "PYTHONPATH": str(upstream)}
    return subprocess.run([python, "-m", f"{package_of(upstream)}.main", "reports",
                           "reportgen", "--results-dir", "R"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def verdicts(stdout: str) -> list[tuple[str, str, list[str]]]:
    """(category, run folder, issues) of each run in reportgen's printed report."""
    rows: list[tuple[str, str, list[str]]] = []
    category = ""
    for line in ANSI.sub("", stdout).splitlines():
        head = HEADER.search(line)
        if head:
            category = head.group(1)
        elif line.strip().startswith("RunID:"):
            rows.append((category, line.split("RunID:", 1)[1].strip(), []))
        elif rows and line.strip().startswith("- [") and rows[-1][0] == category:
            rows[-1][2].append(line.strip()[2:])
    return rows


def submission(work: Path) -> Path:
    """R's runs laid out as a submission folder the checker walks
    (``<division>/<submitter>/results/<system>/<mode>/<model>/...``), with a systems file
    naming this host (what a submitter writes by hand)."""
    system = socket.gethostname() or "host"
    root = work / "S"
    results = root / "closed" / SUBMITTER / "results" / system
    results.mkdir(parents=True)
    for mode in ("training", "checkpointing"):
        if (work / "R" / mode).is_dir():
            shutil.copytree(work / "R" / mode, results / mode)
    systems = root / "closed" / SUBMITTER / "systems"
    systems.mkdir(parents=True)
    (systems / f"{system}.yaml").write_text(
        f"# written by benchmarks/peers/mlpstorage_reportgen.py for the checker's walk\n"
        f"system_under_test:\n  name: {system}\n")
    return root


# the checker's per-submission check classes (checks/<module>.py), in main.py's order
CHECKS = (("directory_checks", "DirectoryCheck"), ("training_checks", "TrainingCheck"),
          ("checkpointing_checks", "CheckpointingCheck"))
# Where main.py cannot be imported (a checkout lacking some of what it imports), the check
# classes that can be are run as main.py runs them: Config(version, submitters), each
# SubmissionLogs the Loader yields, each class called on it (our driver; upstream's classes).
DRIVER = """
import importlib, logging, sys
logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(message)s")
from mlpstorage_py.submission_checker.configuration.configuration import Config
from mlpstorage_py.submission_checker.loader import Loader
log = logging.getLogger("main")
classes = [getattr(importlib.import_module("mlpstorage_py.submission_checker.checks." + m), c)
           for m, c in (item.split(":") for item in sys.argv[2:])]
config = Config(version="v3.0", submitters=None)
bad = [logs.loader_metadata.folder for logs in Loader(sys.argv[1], config).load()
       if not all([c(log, config, logs)() for c in classes])]
sys.exit(1 if bad else 0)
"""


def imports(python: str, checker: Path, module: str) -> str | None:
    """None when ``module`` imports from the checkout, else the last line Python gave."""
    env = {**os.environ, "PYTHONPATH": str(checker)}
    done = subprocess.run([python, "-c", f"import {module}"], env=env, capture_output=True,
                          text=True, timeout=120)
    if done.returncode == 0:
        return None
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def run_checker(python: str, checker: Path, work: Path,
                classes: list[str] | None) -> tuple[int, list[tuple[str, str]], str]:
    """The checker on the submission folder (its main module, or with ``classes``
    (``module:Class``) the driver above): exit status and (level, message) lines."""
    env = {**os.environ, "PYTHONPATH": str(checker)}
    where = str(submission(work))
    argv = ["-c", DRIVER, where, *classes] if classes is not None else [
        "-m", "mlpstorage_py.submission_checker.main", "--input", where, "--version", "v3.0",
        "--csv", str(work / "checker.csv")]
    done = subprocess.run([python, *argv], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    rows = [(m.group(1), m.group(2)) for m in
            (LOG_LINE.match(ln) for ln in (done.stdout + done.stderr).splitlines()) if m]
    return done.returncode, rows, done.stderr


def our_check(work: Path) -> dict[str, bool]:
    """Our ``dliobench check --json`` of R: per workload folder (``training/unet3d``,
    ``checkpointing/llama3-8b``), whether every finding about its runs passed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "dliobench", "check", "R", "--json"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=600)
    doc = json.loads(done.stdout)
    folders = {}
    for result in work.glob("R/**/result.json"):
        rel = result.parent.relative_to(work / "R").parts
        run_id = json.loads(result.read_text()).get("run_id")
        folders[run_id] = "/".join(rel[:2])
    verdict: dict[str, bool] = {}
    for item in doc.get("findings") or []:
        where = folders.get(item.get("subject"), "sets")
        verdict[where] = verdict.get(where, True) and item.get("status") != "fail"
    return verdict


def print_checker(python: str, checker: Path, work: Path) -> bool:
    """Run and summarise the checker; False when it reported a missing file or a parse
    failure (or could not run)."""
    package = "mlpstorage_py.submission_checker"
    missing = imports(python, checker, f"{package}.main")
    classes = None
    if missing:
        print(f"submission checker: main.py not run, {checker} lacks what it imports: "
              f"{missing}")
        found = [f"{m}:{c}" for m, c in CHECKS if not imports(python, checker,
                                                               f"{package}.checks.{m}")]
        if not found:
            return False
        classes = found
        print(f"  ran the check classes that import: {', '.join(found)}")
    status, rows, stderr = run_checker(python, checker, work, classes)
    errors = [m for level, m in rows if level == "ERROR"]
    if status not in (0, 1) or (status and not errors):
        print(f"submission checker: exit {status} without a finding; it said:\n{stderr[-1500:]}")
        return False
    kinds = {"missing file": [m for m in errors if MISSING.search(m)],
             "parse failure": [m for m in errors if PARSE.search(m) and not MISSING.search(m)]}
    kinds["rule"] = [m for m in errors if m not in kinds["missing file"]
                     and m not in kinds["parse failure"]]
    print(f"submission checker: exit {status}, {len(errors)} errors, "
          f"{sum(level == 'WARNING' for level, _ in rows)} warnings")
    warnings = sorted({m for level, m in rows if level == "WARNING"})
    kinds["warning (distinct)"] = warnings
    for kind, messages in kinds.items():
        print(f"  {kind}: {len(messages)}")
        for message in messages:
            print(f"    {message[:300]}")
    ours = our_check(work)
    for workload in sorted(w for w in ours if w != "sets"):
        theirs = not any(f"/{workload}" in m for m in errors)
        print(f"  {workload}: checker {'passes' if theirs else 'fails'}, dliobench check "
              f"{'passes' if ours[workload] else 'fails'}")
    return not kinds["missing file"] and not kinds["parse failure"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, required=True)
    parser.add_argument("--checker", type=Path, help="checkout holding "
                        "mlpstorage_py/submission_checker (default: --upstream)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dliobench-reportgen-"))
    try:
        for argv in (DATAGEN, TRAIN, CKPT_WRITE, CKPT_READ):
            dliobench(work, argv)
        written = sorted(p.parent.relative_to(work) for p in work.glob("R/**/result.json"))
        checked = print_checker(args.python, (args.checker or args.upstream).resolve(), work)
        done = reportgen(args.python, args.upstream.resolve(), work)
        rows = verdicts(done.stdout)
        print(f"dliobench wrote {len(written)} run folders; reportgen exit {done.returncode}, "
              f"found {len(rows)} runs")
        shown: list[list[str]] = []
        for category, run, issues in rows:
            same = shown.index(issues) + 1 if issues in shown else 0
            print(f"{category:8} {run}" + (f"  (issues as set {same})" if same else ""))
            if issues and not same:
                shown.append(issues)
                print(f"           issue set {len(shown)}:")
                for issue in issues:
                    print(f"             {issue}")
        if done.returncode != 0:
            print(done.stderr[-2000:], file=sys.stderr)
        return 0 if done.returncode == 0 and len(rows) >= len(written) and checked else 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
