"""Rerun the suite: every script with the command its RESULTS.md section gives, one after the
other, each under a time limit, its output kept and its wall time recorded.

Usage (from the repository root; root for the scripts that say so):
  python -m benchmarks.harness.rerun --list            the catalogue and what each needs
  python -m benchmarks.harness.rerun [--under 5]       those that take under 5 minutes here
  python -m benchmarks.harness.rerun --only NAME ...   the named ones (see --list)
      [--logs /tmp/rerun] [--limit-factor 3]

The catalogue is the rerunnable form of RESULTS.md's commands: a path under /tmp that a
section names for a tree to measure (``--src /tmp/dliobench-head``) is left out, so the tree
measured is this one. Each entry says how long it took here (the latest rerun, or the round
its section cites) and what it needs beyond ``make test``'s venv; one whose needs are not
met is skipped with that reason. One JSON record (benchmarks/records/) lists every entry's
exit status, wall time and load; each script also writes its own record as usual.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.machine import REPO
from benchmarks.harness.records import Recorder


@dataclass(frozen=True)
class Entry:
    """One rerun: its name, the RESULTS.md section it feeds, the module's arguments, its
    minutes here and what it needs (``root``, a program on PATH, a Python module)."""

    name: str
    section: str
    argv: tuple[str, ...]
    minutes: float
    needs: tuple[str, ...] = ()


def _e(name: str, section: str, command: str, minutes: float, *needs: str) -> Entry:
    return Entry(name, section, tuple(command.split()), minutes, needs)


CATALOGUE = (
    _e("compute_precision", "Accelerator emulation precision",
       "benchmarks.loop.compute_precision --steps 100", 1.2),
    _e("step_overhead", "Per-step harness overhead",
       "benchmarks.loop.step_overhead --reps 3 --ranks 1 2 --compute 0.002 0 "
       "--allreduce-bytes 0", 2.0, "mpiexec"),
    _e("native_npz", "Native loader against the raw read",
       "benchmarks.loaders.loaders --reps 3 --loaders native", 2.5, "root"),
    _e("native_npy", "Native loader against the raw read",
       "benchmarks.loaders.loaders --reps 3 --format npy --loaders native", 2.5, "root"),
    _e("parquet_rows", "Parquet rows against pyarrow",
       "benchmarks.loaders.parquet_rows --reps 3 --files 16", 2.0, "mpiexec"),
    _e("jpeg_decoders", "JPEG decoders",
       "benchmarks.loaders.jpeg_decoders --root /tmp/rerun-jpeg --seconds 2 --reps 5", 2.0),
    _e("small_files", "Small-file generation against fio",
       "benchmarks.generation.small_files --files 100000 --reps 3 --np 1 2 --fio-jobs 1", 3.0,
       "fio", "mpiexec"),
    _e("unet3d_generation", "UNet3D generation on 2 ranks",
       "benchmarks.generation.generation --shape unet3d --reps 3 --np 2 --no-dlio "
       "--quiet-below 1", 3.0, "root", "mpiexec"),
    _e("fio_read", "O_DIRECT reads against fio",
       "benchmarks.storage.fio_read --reps 3 --threads 1 4 --ranks 1 2 --fio-bs 4M 139M", 4.0,
       "root", "fio", "mpiexec"),
    _e("manifest_scale", "A 100 M-file manifest", "benchmarks.scale.manifest_scale", 3.0,
       "root"),
    _e("tfdata_tier", "tf.data on a capped tier",
       "benchmarks.scale.tiers --loader tensorflow --no-layouts --no-staging --ranks 1 2 "
       "--cap-mbps 150 --unet-files 168 --tier /tmp/rerun-slowtier-tf --local "
       "/tmp/rerun-localstage-tf --out /tmp/rerun-tiers-tf-report", 3.4, "root"),
    _e("nodes", "Emulated nodes", "benchmarks.scale.nodes", 3.0, "root"),
    _e("odd_filesystems", "Fault and bad-input sweeps", "benchmarks.faults.odd_filesystems",
       2.0),
    _e("bad_inputs", "Fault and bad-input sweeps", "benchmarks.faults.bad_inputs --jobs 2", 4.0,
       "mpiexec"),
    _e("fresh_clone", "make test on a fresh clone", "benchmarks.setup.fresh_clone", 1.0),
    _e("find_max", "Find-max on one host",
       "benchmarks.verdicts.find_max --max-accelerators 8", 4.0, "mpiexec"),
    _e("vectordb_iops", "VectorDB on a read-IOPS-capped tier",
       "benchmarks.vectordb.iops_cap --iops 1000 --vectors 50000 --dim 64 --threads 1 4 16 "
       "--runtime 30", 6.0, "root", "diskannpy", "fio"),
    _e("milvus_loop", "Milvus engine against pymilvus's own loop",
       "benchmarks.vectordb.milvus_loop --vectors 20000 --dim 64 --threads 1 4 --runtime 10 "
       "--sweep-ef 16 64 --trials 1", 4.0, "pymilvus"),
    # longer than 5 minutes here, or needing what make test does not install
    _e("cluster_links", "Emulated cluster over GlusterFS",
       "benchmarks.cluster.links --compute 2", 6.0, "root", "glusterd", "sshd", "fio"),
    _e("loaders_all", "PyTorch and DALI against the user's pipeline",
       "benchmarks.loaders.loaders --reps 3 --fresh --format npz", 10.0, "root"),
    _e("checkpoints", "Checkpoints",
       "benchmarks.checkpoints.checkpoints --formats torch --ranks 8 1 --reps 3", 11.0,
       "root", "fio", "mpiexec"),
    _e("projection", "Projection calibrated by measurements",
       "benchmarks.scale.projection --work-dir /tmp/rerun-proj", 5.5, "root"),
    _e("trace_replay", "Trace replay",
       "benchmarks.trace.trace_replay --root /tmp/rerun-trace", 1.1, "strace"),
    _e("faults", "Fault and bad-input sweeps",
       "benchmarks.faults.faults --json /tmp/rerun-faults.json", 6.5, "root", "mpiexec"),
    _e("peers", "Small samples against DLIO: native loader",
       "benchmarks.peers.peers --reps 3 --ranks 1 2", 13.0, "dlio"),
    _e("generation_dlio", "Generation against DLIO",
       "benchmarks.generation.generation --shape all --reps 3 --np 1 2 --dlio-np 1 2", 10.0,
       "root", "dlio", "mpiexec"),
    _e("kvcache_peer", "KV cache against upstream's kv-cache.py",
       "benchmarks.kvcache.kvcache_peer --upstream /tmp/kvpeer/upstream --ours . "
       "--venv /tmp/kvpeer/venv", 14.0, "root", "/tmp/kvpeer/venv"),
    _e("s3_clients", "S3 reads against the best client",
       "benchmarks.s3.s3_clients --sets 1MiB:400 64KiB:2000 --threads 4 --reps 5", 6.0,
       "s3torchconnector"),
)

DLIO_VENV = Path("/work/dlio-venv")


def missing(entry: Entry) -> str | None:
    """What this machine lacks for ``entry`` (None: nothing)."""
    for need in entry.needs:
        if need == "root" and os.geteuid() != 0:
            return "needs root"
        if need == "dlio" and not (DLIO_VENV / "bin" / "python").exists():
            return f"needs DLIO's venv at {DLIO_VENV} (../shared/tools/install-dlio-peer.sh)"
        if need.startswith("/") and not Path(need).exists():
            return f"needs {need}"
        if need in ("mpiexec", "fio", "strace", "glusterd", "sshd") and not (
                shutil.which(need) or Path(sys.executable).with_name(need).exists()
                or Path("/usr/sbin", need).exists()):
            return f"needs {need} on PATH"
        if need in ("diskannpy", "pymilvus", "s3torchconnector"):
            probe = subprocess.run([sys.executable, "-c", f"import {need}"],
                                   capture_output=True, check=False)
            if probe.returncode:
                return f"needs the Python module {need}"
    return None


def rerun(entry: Entry, logs: Path, factor: float) -> dict[str, object]:
    """Run one entry under ``factor`` times its minutes (at least 2 minutes); its output to
    ``logs/<name>.log``."""
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{entry.name}.log"
    limit = max(120.0, 60 * entry.minutes * factor)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with log.open("w") as out:
        try:
            rc = subprocess.run([sys.executable, "-m", *entry.argv], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, timeout=limit, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return {"name": entry.name, "section": entry.section, "command": " ".join(entry.argv),
            "rc": rc, "wall_s": round(time.perf_counter() - start, 1), "limit_s": limit,
            "load_start": round(load, 2), "load_end": round(os.getloadavg()[0], 2),
            "log": str(log)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--list", action="store_true", help="print the catalogue and exit")
    p.add_argument("--under", type=float, default=5.0, help="minutes (default 5)")
    p.add_argument("--only", nargs="+", default=None, help="entries by name")
    p.add_argument("--logs", type=Path, default=Path("/tmp/rerun"))
    p.add_argument("--limit-factor", type=float, default=3.0,
                   help="each entry's time limit: this many times its minutes")
    args = p.parse_args(argv)
    if args.list:
        for e in CATALOGUE:
            why = missing(e)
            print(f"{e.name:18s} {e.minutes:5.1f} min  {'skip: ' + why if why else 'ready':40s}"
                  f"  {e.section}")
        return 0
    names = {e.name for e in CATALOGUE}
    if args.only and (unknown := sorted(set(args.only) - names)):
        print(f"no entry named {', '.join(unknown)}; --list names them", file=sys.stderr)
        return 2
    chosen = [e for e in CATALOGUE if (e.name in args.only if args.only
                                       else e.minutes < args.under)]
    recorder = Recorder(__file__)
    done: list[dict[str, object]] = []
    for e in chosen:
        why = missing(e)
        row = {"name": e.name, "section": e.section, "skipped": why} if why else \
            rerun(e, args.logs, args.limit_factor)
        done.append(row)
        print(f"{e.name:18s} " + (f"skipped: {why}" if why else
                                  f"rc {row['rc']}  {row['wall_s']:7.1f} s  load "
                                  f"{row['load_start']}-{row['load_end']}  {row['log']}"),
              flush=True)
    print(f"record: {recorder.write({'entries': done}, pid=os.getpid())}")
    return 0 if all(r.get("rc", 0) == 0 for r in done) else 1


if __name__ == "__main__":
    sys.exit(main())
