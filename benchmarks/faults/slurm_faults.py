"""benchmarks/faults/faults.py's Slurm cases, on the test cluster of tests/slurm/cluster.py
(slurmctld and two slurmd on 127.0.0.1, started for each case): a job cancelled with
``scancel`` (Slurm sends SIGTERM to every task: a time limit does the same), a task SIGKILLed,
and ``srun`` started without a PMI. faults.py lists them where ``slurmctld`` is installed
(as root)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.faults.case import Case, Outcome, count, recovered, until, watch_processes

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.slurm.cluster import Cluster, running  # the tests' own cluster

SRUN = ["srun", "-n", "2", "--mpi=pmi2", sys.executable, "-m", "dliobench"]
LONG_RUN = {"train": {"epochs": 2000, "computation_time": 0.005}}


def _start(case: Case, cluster: Cluster, argv: list[str]) -> subprocess.Popen[str]:
    env = {**cluster.env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(argv, cwd=case.dir, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def _job_id(cluster: Cluster) -> str:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], env=cluster.env, capture_output=True,
                         text=True).stdout.split()
    return out[0] if out else ""


def _steps_journaled(case: Case) -> bool:
    reports = case.dir / "reports"
    return all(b'"k":"steps"' in b"".join(
        p.read_bytes() for p in reports.glob(f"*/journal/rank-{r:05d}.jsonl")) for r in (0, 1))


def scancel_run(root: Path) -> Outcome:
    """scancel a 2-task run: one `terminated` sentence for the job, a partial result of
    both ranks, exit 143 from every task."""
    case = Case(root, "scancel run srun")
    with watch_processes(case), running(case.dir / "slurm") as cluster:
        case.workload(**LONG_RUN)
        proc = _start(case, cluster, [*SRUN, "run", "workload.yaml", "--no-progress"])
        until(lambda: _steps_journaled(case))
        subprocess.run(["scancel", _job_id(cluster)], env=cluster.env, check=False)
        _, err = case.finish(proc, 143, "run")
        said = [ln for ln in err.splitlines() if ln.startswith("dliobench:")]
        if said != ["dliobench: terminated (SIGTERM); generated files are kept"]:
            case.out.problems.append(f"said {said}")
        recovered(case, case.dir / "reports", {0, 1})
    return case.close()


def killed_task(root: Path) -> Outcome:
    """SIGKILL task 1 of a 2-task run under `srun --kill-on-bad-exit=1`: srun ends the step
    at once, and `dliobench recover` makes the partial result. (Without it, Slurm leaves the
    other task running: it waits at the next collective until train.stall_timeout_s.)"""
    case = Case(root, "SIGKILL task 1 of 2 run srun")
    with watch_processes(case), running(case.dir / "slurm") as cluster:
        case.workload(**LONG_RUN)
        proc = _start(case, cluster, [*SRUN[:4], "--kill-on-bad-exit=1", *SRUN[4:], "run",
                                      "workload.yaml", "--no-progress"])
        until(lambda: _steps_journaled(case))
        pid = _task_pid(case.dir, 1)
        if pid is None:
            case.out.problems.append("task 1 not found")
        else:
            os.kill(pid, signal.SIGKILL)
        case.finish(proc, None, "run")
        recovered(case, case.dir / "reports", {0, 1})
    return case.close()


def _task_pid(folder: Path, rank: int) -> int | None:
    """The pid of the dliobench task with SLURM_PROCID ``rank`` running in ``folder``."""
    for entry in Path("/proc").iterdir():
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            if (os.readlink(entry / "cwd") == str(folder) and b"dliobench" in
                    (entry / "cmdline").read_bytes() and f"SLURM_PROCID={rank}".encode() in env):
                return int(entry.name)
        except (OSError, ValueError):
            continue
    return None


def without_pmi(root: Path) -> Outcome:
    """srun with no --mpi and MpiDefault=none: refused in one sentence, exit 2, no run."""
    case = Case(root, "srun without PMI")
    with watch_processes(case), running(case.dir / "slurm") as cluster:
        case.workload()
        proc = _start(case, cluster, [*SRUN[:3], *SRUN[4:], "run", "workload.yaml",
                                      "--no-progress"])
        _, err = case.finish(proc, 2, "run")
        case.sentence(err, "srun started 2 tasks without a PMI", "--mpi=pmi2")
        if count(case.dir / "reports", "result.json"):
            case.out.problems.append("a task ran alone and wrote a result")
    return case.close()


def cases(root: Path) -> list[tuple[str, Callable[[], Outcome]]]:
    """The Slurm cases (faults.py adds them where slurmctld is installed)."""
    return [("scancel run srun", lambda: scancel_run(root)),
            ("SIGKILL task 1 of 2 run srun", lambda: killed_task(root)),
            ("srun without PMI", lambda: without_pmi(root))]


if __name__ == "__main__":  # the Slurm cases alone: python -m benchmarks.faults.slurm_faults
    if not shutil.which("slurmctld") or os.geteuid() != 0:
        sys.exit("The Slurm cases need Slurm's slurmctld and slurmd (apt-get install slurm-wlm) "
                 "and root: run this as root where Slurm is installed.")
    start = time.monotonic()
    for name, run in cases(Path("/tmp/dliobench-slurm-faults")):
        outcome = run()
        print(f"{'ok  ' if outcome.ok else 'FAIL'} {name:30s} exit {outcome.code} "
              f"{'; '.join(outcome.problems + outcome.leftovers)[:300]}", flush=True)
    print(f"{time.monotonic() - start:.1f} s")
