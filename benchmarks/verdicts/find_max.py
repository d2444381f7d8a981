"""The max-accelerator search on this host, as issue 49 ran it: who stops the count, the client
or the storage, and the storage's own rate.

Usage (from the repository root):
    .venv/bin/python -m benchmarks.verdicts.find_max [--workload default]
        [--max-accelerators 8] [--work-dir /tmp/find-max] [--src TREE] [--out REPORT.md]
        [-- KEY=VALUE ...]

It runs `dliobench sweep WORKLOAD --find-max-accelerators --max-accelerators N train.epochs=1`
(the command of issue 49, item 1) in --work-dir, the dataset generated there on its first
probe, then reads the sweep's `sweep.json` and every probe's `result.json` and prints a
markdown report: the machine (cores, load before and after), the search's sentence, and per
probe its ranks, AU, samples/s, MB/s, limiter, the busiest host's CPU busy share over the
counted window (`verdict.host_cpu_busy_share`) and the verdict's reason; then the compute-0
run (`search.storage_alone`): the storage's own rate, and whether its host was busy too.
With --out the report is also written there. Nothing else is kept unless --keep is given
(the work dir is removed at the end, also on failure).

Figures taken on a host shared with other work say more about that work than the storage:
the report states the load average before and after so a reader can tell. Self-contained:
it needs only a dliobench tree (--src, default this checkout) and its Python.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _uptime() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _pct(value: Any) -> str:
    return "n/a" if not isinstance(value, (int, float)) else f"{100 * value:.1f} %"


def _rate(value: Any, scale: float, digits: int = 1) -> str:
    return "n/a" if not isinstance(value, (int, float)) else f"{value * scale:,.{digits}f}"


def run_search(src: Path, work: Path, workload: str, cap: int, extra: list[str]) -> tuple[
        int, str]:
    """The sweep's exit code and its standard output (its progress lines included)."""
    argv = [sys.executable, "-m", "dliobench", "sweep", workload, "--find-max-accelerators",
            "--max-accelerators", str(cap), "--output", str(work / "sweeps"), "train.epochs=1",
            f"dataset.data_folder={work / 'data'}", *extra]
    env = {**os.environ, "PYTHONPATH": str(src), "XDG_CACHE_HOME": str(work / "cache")}
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def probe_rows(sweep: dict[str, Any]) -> list[str]:
    """A markdown row per probe, from its result.json."""
    rows = ["| ranks | AU | samples/s | MB/s | limiter | busiest host's CPUs busy | reason |",
            "|---:|---:|---:|---:|---|---:|---|"]
    for point in sweep["points"]:
        if not point.get("run_dir"):
            rows.append(f"| {point['ranks']} | error | | | | | {point.get('error')} |")
            continue
        result = json.loads((Path(point["run_dir"]) / "result.json").read_text())
        m, v = result["metrics"], result.get("verdict") or {}
        rows.append(f"| {point['ranks']} | {_pct(m['au'])} | {_rate(m['samples_per_s'], 1)} | "
                    f"{_rate(m['bytes_per_s'], 1e-6)} | {v.get('limiter')} | "
                    f"{_pct(v.get('host_cpu_busy_share'))} | {v.get('reason')} |")
    return rows


def report(args: argparse.Namespace, code: int, output: str, loads: tuple[str, str]) -> str:
    """The markdown report of one search."""
    found = sorted((args.work_dir / "sweeps").glob("*/sweep.json"))
    lines = [f"# find-max on {platform.node()}", "",
             f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
             f"- machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
             f"{platform.platform()}",
             f"- load average before: {loads[0]}, after: {loads[1]}",
             f"- command: dliobench sweep {args.workload} --find-max-accelerators "
             f"--max-accelerators {args.max_accelerators} train.epochs=1 "
             f"{' '.join(args.extra)}".rstrip(),
             f"- dliobench: {args.src}", f"- exit code: {code}", ""]
    answer = [ln for ln in output.splitlines() if ln.startswith(("this ", "the probe at"))]
    lines += ["## The answer", "", *(f"> {ln}" for ln in answer or ["(no answer printed)"]), ""]
    if not found:
        return "\n".join([*lines, "No sweep.json was written; the output:", "", "```",
                          output[-4000:], "```"])
    sweep = json.loads(found[-1].read_text())
    search = sweep.get("search") or {}
    lines += ["## Probes", "", *probe_rows(sweep), ""]
    alone = search.get("storage_alone") or {}
    lines += ["## The storage alone (compute 0)", "",
              f"- stopped by: {search.get('stopped_by')}; best: {search.get('best')}",
              f"- ranks: {alone.get('ranks')}, {_rate(alone.get('bytes_per_s'), 1e-9, 3)} GB/s, "
              f"{_rate(alone.get('samples_per_s'), 1)} samples/s, its host's CPUs "
              f"{_pct(alone.get('host_cpu_busy_share'))} busy"
              + (f", error: {alone['error']}" if alone.get("error") else "")]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="default")
    parser.add_argument("--max-accelerators", type=int, default=8)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/dliobench-find-max"))
    parser.add_argument("--src", type=Path, default=REPO)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("extra", nargs="*", help="KEY=VALUE overrides for every probe")
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=False)
    try:
        before = _uptime()
        code, output = run_search(args.src.resolve(), args.work_dir.resolve(), args.workload,
                                  args.max_accelerators, args.extra)
        text = report(args, code, output, (before, _uptime()))
    finally:
        if not args.keep:
            shutil.rmtree(args.work_dir, ignore_errors=True)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
