"""`dliobench kvcache` side by side with upstream's kv-cache.py on two read-capped tiers.

Usage (root; loop devices and the cgroup-v1 blkio controller, see slowdisk.sh):
  python -m benchmarks.kvcache.kvcache_peer --upstream /tmp/kvpeer/upstream
      [--ours /work/wt/kvcache] [--rates 50 200] [--trials 3] [--users 8] [--duration 20]
      [--cpu-mem-gb 0] [--generation-mode none] [--seed 42] [--root /tmp/kvpeer-bench]
      [--json OUT.json]

Upstream is mlcommons/storage kv_cache_benchmark/kv-cache.py at commit
17335a710fd8d39a2c42fb02bea528fdd9da9669 (the single-file version: every class in one file,
128,468 characters, sha256 below), run from its own venv made here with its requirements.txt
(kv_cache_benchmark/requirements.txt@a2987aafc45b4429dabeab9c0092ac48dccccc49: numpy>=1.20.0 is
its one core requirement; torch/cupy are optional and left out, so upstream has no GPU tier,
as --gpu-mem-gb 0 asks). No copy of it is in this repository: this machine reaches no GitHub,
so --upstream names a folder holding kv-cache.py assembled from that commit (here: the search
index's read_file of that path, stored at that commit, its nine 16,000-character pages written
out verbatim; length and the text at every page boundary checked); the script refuses a file
whose sha256 differs. With network: `git -C storage checkout 17335a7` and pass
storage/kv_cache_benchmark.

Both tools get the same options (--model llama3.1-8b --num-users U --duration S
--gpu-mem-gb 0 --cpu-mem-gb G --generation-mode M --seed 42) and the same cache folder on each
tier (`../shared/tools/slowdisk.sh up`: ext4 on a loop device, reads capped), run under
`slowdisk.sh run` so the cap applies. Trials alternate tools. Per trial: decode bytes read and
tokens/s as the tool reports them, the device's read bytes (/sys/block/loopN/stat) and its
read bandwidth over the first S seconds from its first read (the same window for both tools)
and over the whole window it read in, client CPU-seconds (getrusage of children). A trial is
stopped at --limit (SIGINT, SIGKILL 10 s later); a stopped tool reports nothing.
Then fio reads the entries the last trial left, with U synchronous readers (the queue depth of
U users), from the same folder under the same cap. Scale: upstream's defaults are 100 users
and 60 s; U=8 users and S=20 s keep a trial at 30-40 s on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SLOWDISK = next((p for p in (REPO.parent / "shared" / "tools" / "slowdisk.sh",
                             REPO.parent.parent / "shared" / "tools" / "slowdisk.sh")
                 if p.exists()), REPO.parent / "shared" / "tools" / "slowdisk.sh")
UPSTREAM_COMMIT = "17335a710fd8d39a2c42fb02bea528fdd9da9669"
UPSTREAM_SHA256 = "2cdc20241df460a40d8906b074242ccd3afd1718739dcb49871ee1b91a9b9199"
UPSTREAM_REQUIREMENTS = ["numpy>=1.20.0"]  # requirements.txt@a2987aa, core section
GIB = 1024 ** 3
_child: subprocess.Popen[bytes] | None = None


def parse() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--upstream", type=Path, required=True, help="folder holding kv-cache.py")
    p.add_argument("--venv", type=Path, default=Path("/tmp/kvpeer/venv"),
                   help="upstream's venv (made here when missing)")
    p.add_argument("--ours", type=Path, help="a dliobench tree to run (PYTHONPATH); none: skip")
    p.add_argument("--python", default="/work/main/.venv/bin/python", help="python for ours")
    p.add_argument("--rates", type=int, nargs=2, default=[50, 200], help="MB/s of the tiers")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--duration", type=int, default=20)
    p.add_argument("--cpu-mem-gb", type=float, default=0.0)
    p.add_argument("--generation-mode", default="none")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--fio-runtime", type=int, default=15)
    p.add_argument("--limit", type=int, default=0, help="stop a trial after this many seconds "
                   "(SIGINT, then SIGKILL 10 s later); 0: duration + 60")
    p.add_argument("--tier-mb", type=int, default=12000, help="size of each tier's image")
    p.add_argument("--root", type=Path, default=Path("/tmp/kvpeer-bench"))
    p.add_argument("--json", type=Path, default=Path("/tmp/kvpeer-bench.json"))
    return p.parse_args()


def check_upstream(a: argparse.Namespace) -> Path:
    """Upstream's kv-cache.py, refused unless it is the pinned file; its venv, made if missing."""
    script = a.upstream / "kv-cache.py"
    if not script.is_file():
        sys.exit(f"{script} is missing: assemble kv-cache.py@{UPSTREAM_COMMIT} there first.")
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    if digest != UPSTREAM_SHA256:
        sys.exit(f"{script} is not kv-cache.py@{UPSTREAM_COMMIT[:7]} (sha256 {digest[:12]}).")
    if not (a.venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(a.venv)], check=True)
        subprocess.run([str(a.venv / "bin" / "pip"), "install", "-q", *UPSTREAM_REQUIREMENTS],
                       check=True)
    return script


def options(a: argparse.Namespace, cache: Path) -> list[str]:
    """The options both tools get."""
    return ["--model", "llama3.1-8b", "--num-users", str(a.users), "--duration",
            str(a.duration), "--gpu-mem-gb", "0", "--cpu-mem-gb", f"{a.cpu_mem_gb:g}",
            "--cache-dir", str(cache), "--generation-mode", a.generation_mode,
            "--seed", str(a.seed)]


def command(a: argparse.Namespace, tool: str, cache: Path, out: Path) -> tuple[list[str], dict]:
    """The command line and environment of one trial of ``tool``."""
    env = dict(os.environ)
    if tool == "upstream":
        return [str(a.venv / "bin" / "python"), str(a.upstream / "kv-cache.py"),
                *options(a, cache), "--output", str(out / "upstream.json")], env
    env["PYTHONPATH"] = str(a.ours)
    return [a.python, "-m", "dliobench", "kvcache", *options(a, cache),
            f"output.folder={out / 'ours'}"], env


def device(mount: Path) -> str:
    """The block device (loopN) under ``mount``."""
    src = subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(mount)], capture_output=True,
                         text=True, check=True).stdout.strip()
    return Path(src).name


def read_bytes(dev: str) -> int:
    """Bytes the device has read since boot."""
    return int(Path(f"/sys/block/{dev}/stat").read_text().split()[2]) * 512


class Meter:
    """Samples a device's read counter every 0.2 s while a command runs."""

    def __init__(self, dev: str) -> None:
        self.dev, self.samples, self._stop = dev, [(time.perf_counter(), read_bytes(dev))], False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop:
            time.sleep(0.2)
            self.samples.append((time.perf_counter(), read_bytes(self.dev)))

    def stop(self, fixed_s: float) -> dict[str, float]:
        """Bytes read; the bandwidth over the window from before the first to the last read,
        and over the first ``fixed_s`` seconds from the first read (the same window for every
        tool, whatever it reads after its duration)."""
        self._stop = True
        self._thread.join()
        self.samples.append((time.perf_counter(), read_bytes(self.dev)))
        s = self.samples
        moved = [i for i in range(1, len(s)) if s[i][1] > s[i - 1][1]]
        total = s[-1][1] - s[0][1]
        if not moved:
            return {"device_read_bytes": 0, "read_window_s": 0.0, "read_bw_MBps": 0.0,
                    "fixed_window_bw_MBps": 0.0}
        t0, b0 = s[moved[0] - 1]
        window = s[moved[-1]][0] - t0
        fixed = [b for t, b in s if t <= t0 + fixed_s][-1] - b0
        return {"device_read_bytes": total, "read_window_s": round(window, 2),
                "read_bw_MBps": round(total / window / 1e6, 2),
                "fixed_window_bw_MBps": round(fixed / fixed_s / 1e6, 2)}


def run_capped(tier: Path, cmd: list[str], limit: float, window: float,
               env: dict | None = None, cwd: Path | None = None) -> dict[str, Any]:
    """Run ``cmd`` with the tier's reads capped, stopped after ``limit`` seconds; its device
    figures (``window``: the fixed bandwidth window), wall and CPU seconds."""
    global _child
    meter, before = Meter(device(tier)), resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    _child = subprocess.Popen(["bash", str(SLOWDISK), "run", str(tier), *cmd], env=env, cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = _child.communicate(timeout=limit)
        stopped = None
    except subprocess.TimeoutExpired:
        stopped = round(time.perf_counter() - start, 1)
        _child.send_signal(signal.SIGINT)
        try:
            out, _ = _child.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            _child.kill()  # its process ends when its read in flight does
            out, _ = _child.communicate()
    rc, _child = _child.returncode, None
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    fig = meter.stop(window)
    fig.update(rc=rc, wall_s=round(wall, 2), cpu_s=round(cpu, 2), stopped_at_s=stopped)
    if rc != 0:
        print(out.decode(errors="replace")[-3000:], file=sys.stderr)
    return fig | {"log_tail": out.decode(errors="replace")[-400:]}


def find_key(obj: Any, key: str) -> Any:
    """The first value of ``key`` anywhere in a JSON document (depth first)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            found = find_key(v, key)
            if found is not None:
                return found
    return None


def reported(out: Path) -> dict[str, float | None]:
    """Decode bytes read and tokens/s from the JSON documents a trial wrote under ``out``."""
    for doc in sorted(out.rglob("*.json")):
        data = json.loads(doc.read_text())
        gb = find_key(data, "decode_bytes_read_gb")
        if gb is not None:
            return {"decode_bytes_read": round(gb * GIB),
                    "tokens_per_s": find_key(data, "avg_throughput_tokens_per_sec")}
    return {"decode_bytes_read": None, "tokens_per_s": None}


def trial(a: argparse.Namespace, tool: str, tier: Path, n: int) -> dict[str, Any]:
    """One trial of ``tool`` on ``tier``, with a fresh cache folder and output folder."""
    cache, out = tier / "cache", a.root / "out" / f"{tool}-{tier.name}-{n}"
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd, env = command(a, tool, cache, out)
    limit = a.limit or a.duration + 60
    fig = run_capped(tier, cmd, limit, a.duration, env, cwd=out) | reported(out)  # cwd: ours
    gb = fig["device_read_bytes"] / 1e9
    fig["cpu_s_per_GB_read"] = round(fig["cpu_s"] / gb, 2) if gb else None
    print(f"  {tool:8s} {tier.name} trial {n}: " + ", ".join(
        f"{k}={v}" for k, v in fig.items() if k != "log_tail"), flush=True)
    return fig


def fio(a: argparse.Namespace, tier: Path) -> dict[str, Any]:
    """fio reading the entries left in the cache folder: U synchronous readers, O_DIRECT."""
    files = [f for f in (tier / "cache").rglob("*") if f.is_file()]
    sizes = [f.stat().st_size for f in files]
    if not files:
        return {"error": "no entries left to read"}
    names = ":".join(str(f).replace(":", "\\:") for f in files)
    cmd = ["fio", "--name=kvread", f"--filename={names}", "--rw=read", "--bs=1M",
           "--direct=1", "--ioengine=psync", f"--numjobs={a.users}", "--time_based",
           f"--runtime={a.fio_runtime}", "--file_service_type=random", "--group_reporting"]
    fig = run_capped(tier, cmd, a.fio_runtime + 60, a.fio_runtime - 1)
    fig.update(entries=len(files), entry_MB_median=round(statistics.median(sizes) / 1e6, 1),
               entry_MB_max=round(max(sizes) / 1e6, 1))
    gb = fig["device_read_bytes"] / 1e9
    fig["cpu_s_per_GB_read"] = round(fig["cpu_s"] / gb, 2) if gb else None
    print(f"  fio      {tier.name}: " + ", ".join(
        f"{k}={v}" for k, v in fig.items() if k != "log_tail"), flush=True)
    return fig


def cv(values: list[float | None]) -> float | None:
    """Coefficient of variation in percent (sample standard deviation over the mean)."""
    xs = [v for v in values if v is not None]
    if len(xs) < 2 or not statistics.mean(xs):
        return None
    return round(100 * statistics.stdev(xs) / statistics.mean(xs), 1)


def summarize(raw: dict[str, Any], tools: list[str], tiers: list[str]) -> dict[str, Any]:
    """Per tool: CV per tier, bandwidth ratio between the tiers, CPU per GB, share of fio."""
    out: dict[str, Any] = {}
    for tool in tools:
        s: dict[str, Any] = {}
        for t in tiers:
            runs, fio_bw = raw[tool][t], raw["fio"].get(t, {}).get("fixed_window_bw_MBps")
            bw = statistics.mean(r["fixed_window_bw_MBps"] for r in runs)
            s[t] = {"cv_decode_bytes_pct": cv([r["decode_bytes_read"] for r in runs]),
                    "cv_tokens_per_s_pct": cv([r["tokens_per_s"] for r in runs]),
                    "cv_window_bw_pct": cv([r["fixed_window_bw_MBps"] for r in runs]),
                    "read_bw_MBps": round(bw, 1),
                    "read_bw_whole_run_MBps": round(statistics.mean(
                        r["read_bw_MBps"] for r in runs), 1),
                    "of_fio": round(bw / fio_bw, 2) if fio_bw else None,
                    "cpu_s_per_GB_read": round(statistics.mean(
                        r["cpu_s_per_GB_read"] or 0 for r in runs), 2),
                    "stopped_at_limit": sum(r["stopped_at_s"] is not None for r in runs),
                    "wall_s": [r["wall_s"] for r in runs]}
        lo, hi = s[tiers[0]]["read_bw_MBps"], s[tiers[1]]["read_bw_MBps"]
        s["bw_ratio"] = round(hi / lo, 2) if lo else None
        out[tool] = s
    return out


def table(summary: dict[str, Any], tiers: list[str], rates: list[int]) -> str:
    """The peer table, markdown."""
    rows = ["| tool | tier | CV decode bytes | CV tokens/s | CV read MB/s | read MB/s (first D s)"
            " | of fio | read MB/s (whole run) | CPU-s per GB read | ratio between tiers | "
            "wall s | stopped at limit |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for tool, s in summary.items():
        for t, rate in zip(tiers, rates, strict=True):
            x = s[t]
            rows.append(f"| {tool} | {rate} MB/s | {x['cv_decode_bytes_pct']} % | "
                        f"{x['cv_tokens_per_s_pct']} % | {x['cv_window_bw_pct']} % | "
                        f"{x['read_bw_MBps']} | {x['of_fio']} | {x['read_bw_whole_run_MBps']} | "
                        f"{x['cpu_s_per_GB_read']} | {s['bw_ratio'] if t == tiers[1] else ''} | "
                        f"{', '.join(f'{w:.0f}' for w in x['wall_s'])} | "
                        f"{x['stopped_at_limit']} of {len(x['wall_s'])} |")
    return "\n".join(rows)


def interrupted(signum: int, _frame: Any) -> None:
    """SIGTERM as Ctrl-C, so the tiers come down."""
    raise KeyboardInterrupt


def main() -> None:
    """Make the tiers, run every trial and fio, print and save the figures, clean up."""
    a = parse()
    check_upstream(a)
    tools = ["upstream"] + (["ours"] if a.ours else [])
    tiers = [a.root / f"tier{r}" for r in a.rates]
    signal.signal(signal.SIGTERM, interrupted)
    raw: dict[str, Any] = {"args": {k: str(v) for k, v in vars(a).items()},
                           "fio": {}, **{t: {} for t in tools}}
    try:
        for tier, rate in zip(tiers, a.rates, strict=True):
            subprocess.run(["bash", str(SLOWDISK), "up", str(tier), str(a.tier_mb), str(rate)],
                           check=True)
        for tier in tiers:
            for tool in tools:
                raw[tool][tier.name] = []
            for n in range(a.trials):
                for tool in tools:
                    raw[tool][tier.name].append(trial(a, tool, tier, n))
            raw["fio"][tier.name] = fio(a, tier)
        raw["summary"] = summarize(raw, tools, [t.name for t in tiers])
        a.json.write_text(json.dumps(raw, indent=1))
        print(table(raw["summary"], [t.name for t in tiers], a.rates))
        print(f"raw figures: {a.json}")
    except KeyboardInterrupt:
        print("interrupted: removing the tiers and the scratch folder", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        if _child is not None and _child.poll() is None:
            _child.kill()
            _child.wait()
        for tier in tiers:
            subprocess.run(["bash", str(SLOWDISK), "down", str(tier)], capture_output=True)
        shutil.rmtree(a.root, ignore_errors=True)


if __name__ == "__main__":
    main()
