"""How long `make run` takes on a fresh clone (issue 49, item 8: the core with the torch and
mpi extras, then the default workload), and whether the README's quick start runs right
after it (`dliobench run unet3d` scaled down, with the bundled mpiexec).

    python -m benchmarks.setup.fresh_clone [--repo .] [--keep]

Clones the repository's HEAD into a temporary folder (pip takes the wheels from this
machine's local wheel folders), times `make run` end to end and prints one JSON line: the
commit, the seconds, the load average before and after, and the quick start's exit status.
Needs: python3 with venv, make, about 2 GB of free disk. Takes ~1 min here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

QUICK_START = ["dataset.num_files_train=32", "dataset.record_length_bytes=262144",
               "dataset.record_length_bytes_stdev=0", "train.epochs=1", "--yes",
               "--no-progress"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--keep", action="store_true", help="keep the clone")
    args = parser.parse_args()
    where = Path(tempfile.mkdtemp(prefix="dliobench-fresh-"))
    clone = where / "dliobench"
    subprocess.run(["git", "clone", "-q", args.repo, str(clone)], check=True)
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    made = subprocess.run(["make", "run"], cwd=clone, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    load_after = os.getloadavg()[0]
    quick = subprocess.run([str(clone / ".venv/bin/mpiexec"), "-n", "2",
                            str(clone / ".venv/bin/dliobench"), "run", "unet3d", *QUICK_START],
                           cwd=clone, capture_output=True, text=True)
    print(json.dumps({"benchmark": "fresh_clone_make_run", "commit": commit,
                      "make_run_s": round(seconds, 1), "make_run_rc": made.returncode,
                      "quick_start_rc": quick.returncode, "load_before": load_before,
                      "load_after": load_after, "cpus": os.cpu_count()}))
    if made.returncode or quick.returncode:
        print((made.stderr or quick.stderr)[-2000:])
    if not args.keep:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
