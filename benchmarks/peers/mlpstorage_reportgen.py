"""Run mlpstorage's own report tool on a results folder that dliobench made, and count what it
found and what it concluded.

Usage: python -m benchmarks.peers.mlpstorage_reportgen --upstream DIR [--python PY] [--keep]

DIR is a checkout of mlcommons/storage (docs/benchmarks.md says which commit and how): its
package ``mlpstorage`` (v2.0) or ``mlpstorage_py`` (v3.0) is run as is, with PY (a Python that
has the package's dependencies: pyyaml, psutil, pyarrow) and DIR on PYTHONPATH, as
``python -m <package>.main reports reportgen --results-dir R``. No upstream code is copied
into this repository.

R is made in a scratch folder by mlpstorage's own command lines through dliobench's front
door, scaled down as tests/integration/test_mlpstorage_cli.py scales them: a training run set
of ``--loops 6`` (unet3d, b200, 16 files of 64 KiB, one epoch, our native loader) and one
``checkpointing run`` (llama3-8b, a ten-thousandth of every tensor, one write and one read).
Printed: the run folders dliobench wrote, the runs reportgen found, and its category
(CLOSED/OPEN/INVALID) for each, with the issues it gave. Exits 1 when reportgen fails or finds
fewer runs than dliobench wrote.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
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
CKPT = ["checkpointing", "run", "--model", "llama3-8b", "--client-host-memory-in-gb", "512",
        "--num-processes", "1", "--checkpoint-folder", "ckpt", "--results-dir", "R",
        "--num-checkpoints-read", "1", "--num-checkpoints-write", "1", "--param",
        "checkpoint.scale=0.0001", "checkpoint.time_between_checkpoints=0",
        "checkpoint.file_format=raw"]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dliobench-reportgen-"))
    try:
        dliobench(work, TRAIN)
        dliobench(work, CKPT)
        written = sorted(p.parent.relative_to(work) for p in work.glob("R/**/result.json"))
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
        return 0 if done.returncode == 0 and len(rows) >= len(written) else 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
