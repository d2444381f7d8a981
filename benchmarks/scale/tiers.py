"""A slow storage tier on one machine: AU against ranks on a read-capped disk, and staging.

Usage (root; needs loop devices and the cgroup-v1 blkio controller, see slowdisk.sh):
    /tmp/venvtest/bin/python -m benchmarks.scale.tiers [--cap-mbps 280] [--ranks 1 2 4]
        [--unet-files 336] [--unet-sample-mib 8] [--unet-compute 0.323] [--epochs 3]
        [--bert-steps 20] [--layout-compute 0.05 0] [--no-layouts] [--no-staging]
        [--loader native|pytorch|dali|tensorflow]
        [--tier /work/slowtier] [--local /work/localstage] [--out benchmarks/scale/tiers-report]

It makes an ext4 file system whose reads the kernel caps at --cap-mbps MB/s
(`slowdisk.sh up`), generates a scaled-down UNet3D, a scaled-down BERT and the three
layouts of configs/layout_comparison.yaml onto it (writes are not capped), and runs under
`slowdisk.sh run` (all ranks' reads capped together): (a) UNet3D over --ranks, (b) BERT over
--ranks, (c) UNet3D staged to the local disk (`storage.stage_to`; its source evicted before
each run), (d) the layout comparison on the capped tier and on the local disk, with the
shipped compute time and with none (read-bound). Every run evicts its dataset before each
epoch (`storage.drop_cache=true`) and has no allreduce (`train.allreduce_bytes=0`).
Prints markdown tables of measured AU against AU = min(1, c x B / (n x batch bytes)), and
writes `dliobench report` of the sweeps to --out/scaling and --out/layouts (both tiers and
both compute times in one report; report.html dropped when over 1 MB). The tier, the
datasets and the staged copies are removed at the end, also on failure; the sweep folders
(results only) stay in --work-dir. Default run: about 7 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SLOWDISK = REPO.parent / "shared" / "tools" / "slowdisk.sh"
DLIOBENCH = [sys.executable, "-m", "dliobench"]
HTML_LIMIT = 1_000_000


@dataclass(frozen=True)
class Case:
    """One sweep of the benchmark: what runs, where its data sits, which bandwidth feeds it."""

    name: str
    where: str
    sweep: Path
    capped: bool
    bandwidth: float  # bytes/s of the tier the training reads
    extra: tuple[str, ...] = ()  # overrides added on the sweep's command line
    evict: Path | None = None  # a dataset to evict from the page cache first
    report: str = "scaling"  # the report (subfolder of --out) that shows this sweep


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (defaults: about 7 minutes on 2 cores)."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", type=Path, default=Path("/work/slowtier"), help="capped mount")
    p.add_argument("--local", type=Path, default=Path("/work/localstage"),
                   help="folder on the fast local disk (staging and local layouts)")
    p.add_argument("--size-mb", type=int, default=5000, help="capped file system size")
    p.add_argument("--cap-mbps", type=int, default=280, help="read cap B in MB/s (10^6)")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4], help="rank counts")
    p.add_argument("--unet-files", type=int, default=336, help="UNet3D files (1 sample each)")
    p.add_argument("--unet-sample-mib", type=int, default=8, help="UNet3D sample size")
    p.add_argument("--unet-compute", type=float, default=0.323, help="s per batch of 7")
    p.add_argument("--epochs", type=int, default=3, help="UNet3D epochs")
    p.add_argument("--bert-steps", type=int, default=20, help="BERT training steps")
    p.add_argument("--no-layouts", action="store_true", help="skip the layout comparison")
    p.add_argument("--no-staging", action="store_true", help="skip the staged UNet3D runs")
    p.add_argument("--loader", default=None, choices=("native", "pytorch", "dali", "tensorflow"),
                   help="reader.data_loader of the UNet3D and BERT runs (default: as shipped)")
    p.add_argument("--layout-compute", type=float, nargs="+", default=[0.05, 0.0],
                   help="compute s per batch of the layout sweeps (0.05: as shipped; 0: "
                        "read-bound, throughput only)")
    p.add_argument("--timeout", type=float, default=900, help="per sweep point, s")
    p.add_argument("--slowdisk", type=Path, default=SLOWDISK, help="path of slowdisk.sh")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "scale" / "tiers-report")
    p.add_argument("--work-dir", type=Path, default=None,
                   help="sweep files and sweep folders (default: a new /tmp folder)")
    return p.parse_args(argv)


def sh(cmd: list[str], capped: Path | None = None, slowdisk: Path = SLOWDISK) -> None:
    """Run a command from the repository root (under the read cap of ``capped``); echo it."""
    if capped is not None:
        cmd = ["bash", str(slowdisk), "run", str(capped), *cmd]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)


def unet_overrides(a: argparse.Namespace) -> list[str]:
    """The scaled-down UNet3D (same format, loader, batch 7; smaller samples)."""
    return [f"dataset.data_folder={a.tier}/unet3d", f"dataset.num_files_train={a.unet_files}",
            f"dataset.record_length_bytes={a.unet_sample_mib}MiB",
            "dataset.record_length_bytes_stdev=0", f"train.epochs={a.epochs}",
            f"train.computation_time={a.unet_compute}", *loader_override(a)]


def bert_overrides(a: argparse.Namespace) -> list[str]:
    """The scaled-down BERT (same sample size, batch and V100 compute; fewer files, steps)."""
    return [f"dataset.data_folder={a.tier}/bert", "dataset.num_files_train=16",
            "dataset.num_samples_per_file=4000", f"train.total_training_steps={a.bert_steps}",
            *loader_override(a)]


def loader_override(a: argparse.Namespace) -> list[str]:
    """``reader.data_loader`` when --loader chose one."""
    return [f"reader.data_loader={a.loader}"] if a.loader else []


COMMON = ["train.allreduce_bytes=0", "storage.drop_cache=true"]


def write_sweep(work: Path, name: str, workload: str, overrides: list[str],
                ranks: list[int]) -> Path:
    """A sweep file over ranks only, in the work folder."""
    path = work / f"{name}.yaml"
    doc = {"name": name, "workload": str(REPO / "workloads" / workload),
           "overrides": [*overrides, *COMMON], "axes": {"ranks": ranks}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def layout_points(sweep: Path) -> list[list[str]]:
    """Each layout's overrides (fixed ones + its axis values) from the layout sweep file."""
    doc = yaml.safe_load(sweep.read_text())
    out = []
    for axis, values in doc["axes"].items():
        if axis == "ranks":
            continue
        keys = [k.strip() for k in axis.split(",")]
        out += [[*doc["overrides"], *(f"{k}={v}" for k, v in zip(keys, vals, strict=True))]
                for vals in values]
    return out


def generate_all(a: argparse.Namespace, layouts: Path) -> None:
    """Write every dataset before the capped runs (writes are not capped)."""
    sh([*DLIOBENCH, "generate", "--yes", "unet3d", *unet_overrides(a), "--no-progress"])
    sh([*DLIOBENCH, "generate", "--yes", "bert", *bert_overrides(a), "--no-progress"])
    if a.no_layouts:
        return
    for root in (a.tier, a.local / "layouts"):
        for point in layout_points(layouts):
            sh([*DLIOBENCH, "generate", "--yes", "default", *point, f"storage.storage_root={root}",
                "--no-progress"])


def scaling_cases(a: argparse.Namespace, work: Path, local_bps: float) -> list[Case]:
    """UNet3D and BERT over ranks on the capped tier, and UNet3D staged to the local disk."""
    cap = a.cap_mbps * 1e6
    stage = [f"storage.stage_to={a.local}/stage"]
    cases = [
        Case("unet3d-capped", "capped tier",
             write_sweep(work, "unet3d-capped", "unet3d.yaml",
                         [*unet_overrides(a), f"output.label=UNet3D, capped tier "
                          f"({a.cap_mbps} MB/s)"], a.ranks), True, cap),
        Case("bert-capped", "capped tier",
             write_sweep(work, "bert-capped", "bert.yaml",
                         [*bert_overrides(a), f"output.label=BERT, capped tier "
                          f"({a.cap_mbps} MB/s)"], a.ranks), True, cap),
    ]
    # One sweep per rank count, the source evicted before each: staging reads the source
    # through the page cache and does not evict it first, even with storage.drop_cache=true.
    if a.no_staging:
        return cases
    return cases + [Case(f"unet3d-staged-r{n}", "staged",
                         write_sweep(work, f"unet3d-staged-r{n}", "unet3d.yaml",
                                     [*unet_overrides(a), *stage,
                                      "output.label=UNet3D, staged to the local disk"], [n]),
                         True, local_bps, evict=a.tier / "unet3d") for n in a.ranks]


def layout_sweep(work: Path, name: str, root: Path, where: str, compute: float) -> Path:
    """configs/layout_comparison.yaml on one tier at one compute time, as a sweep file whose
    labels also name the tier and the compute (one-value axes), so that one report over all
    of them draws a group of bars per layout and a bar per tier and compute time."""
    doc = yaml.safe_load((REPO / "configs" / "layout_comparison.yaml").read_text())
    doc["name"] = name
    doc["workload"] = str(REPO / doc["workload"])
    doc["overrides"] = [o for o in doc["overrides"] if not o.startswith("train.computation_time")]
    doc["overrides"] += COMMON
    doc["axes"]["storage.storage_root"] = [str(root)]
    doc["axes"]["train.computation_time"] = [compute]
    doc["labels"]["storage.storage_root"] = [where]
    doc["labels"]["train.computation_time"] = [f"compute {compute:g} s" if compute
                                               else "read-bound"]
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def layout_cases(a: argparse.Namespace, work: Path, local_bps: float) -> list[Case]:
    """configs/layout_comparison.yaml on each tier, as shipped and read-bound (compute 0),
    all drawn in one report (``layouts``)."""
    tiers = [("capped", "capped tier", a.tier, True, a.cap_mbps * 1e6),
             ("local", "local disk", a.local / "layouts", False, local_bps)]
    return [Case(f"layout-{tag}-c{c:g}", where,
                 layout_sweep(work, f"layout-{tag}-c{c:g}", root, where, c), capped, bps,
                 report="layouts")
            for tag, where, root, capped, bps in tiers for c in a.layout_compute]


def run_case(case: Case, a: argparse.Namespace, work: Path) -> Path | None:
    """Run one sweep (capped or not) into its own output root; return the sweep folder."""
    root = work / "sweeps" / case.name
    if case.evict is not None:
        evict_tree(case.evict)
    cmd = [*DLIOBENCH, "sweep", str(case.sweep), *case.extra, "--output", str(root),
           "--timeout", str(a.timeout)]
    if case.capped:
        cmd = ["bash", str(a.slowdisk), "run", str(a.tier), *cmd]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    start = time.monotonic()
    rc = subprocess.run(cmd, cwd=REPO).returncode
    print(f"{case.name}: exit {rc} after {time.monotonic() - start:.0f} s", file=sys.stderr)
    found = sorted(p for p in root.glob("*") if p.is_dir()) if root.exists() else []
    return found[-1] if found else None


def evict_tree(folder: Path) -> None:
    """Drop the cached pages of every file below ``folder`` (they are clean: no fsync)."""
    for path in (p for p in folder.rglob("*") if p.is_file()):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def probe_read_bps(folder: Path, nbytes: int = 512 << 20, chunk: int = 8 << 20) -> float:
    """Single-stream O_DIRECT read rate of the local disk (bytes/s): B for staged runs."""
    path = folder / "probe.bin"
    block = os.urandom(chunk)
    with open(path, "wb") as handle:
        for _ in range(nbytes // chunk):
            handle.write(block)
        os.fsync(handle.fileno())
    buf = mmap.mmap(-1, chunk)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        start = time.perf_counter()
        done = sum(os.preadv(fd, [buf], off) for off in range(0, nbytes, chunk))
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()
    return done / seconds


def expected_au(c: float, bandwidth: float, ranks: int, batch_bytes: float | None) -> float | None:
    """AU = min(1, c x B / (n x batch bytes)): n ranks share B, each needs a batch per c."""
    if not batch_bytes:
        return None
    return min(1.0, c * bandwidth / (ranks * batch_bytes))


def collect(case: Case, folder: Path | None) -> list[dict[str, Any]]:
    """One row per run of a sweep folder; batch bytes from the bytes actually read."""
    rows = []
    for path in sorted(folder.glob("*/*/result.json")) if folder else []:
        r = json.loads(path.read_text())
        m, st, cfg = r["metrics"], r.get("staging") or {}, r["config"]
        batch = cfg["reader"]["batch_size"] * m["bytes"] / m["samples"] if m["samples"] else None
        c, n = cfg["train"]["computation_time"], r["ranks_count"]
        rows.append({
            "case": case.name, "workload": r["workload"], "ranks": n, "where": case.where,
            "run_id": r["run_id"], "status": r["status"],
            "layout": Path(cfg["dataset"]["data_folder"]).name, "compute": c,
            "batch_bytes": batch, "au": m["au"],
            "expected": expected_au(c, case.bandwidth, n, batch),
            "samples_per_s": m["samples_per_s"], "mb_per_s": m["bytes_per_s"] / 1e6,
            "wait_p99_ms": 1e3 * m["wait_p99_s"] if m["wait_p99_s"] is not None else None,
            "stage_s": st.get("seconds"),
            "stage_gbps": st["bytes_per_s"] / 1e9 if st.get("bytes_per_s") else None})
    return sorted(rows, key=lambda x: (x["layout"], x["ranks"]))


def formula_line(rows: list[dict[str, Any]], cap_mbps: int) -> str:
    """The UNet3D numbers that go into the formula, from its first capped run."""
    unet = [r for r in rows if r["case"] == "unet3d-capped"]
    if not unet:
        return "no UNet3D run on the capped tier"
    r = unet[0]
    k = r["compute"] * cap_mbps * 1e6 / r["batch_bytes"]
    return (f"UNet3D: c = {r['compute']:g} s per batch, batch bytes = {r['batch_bytes']:,.0f} B "
            f"(read per batch), B = {cap_mbps} MB/s: c x B / batch bytes = {k:.3f}, so "
            f"expected AU = min(1, {k:.3f} / n)")


def fmt(x: float | None, spec: str) -> str:
    """A number in a table cell, '-' when absent."""
    return "-" if x is None else format(x, spec)


def scaling_table(rows: list[dict[str, Any]]) -> str:
    """UNet3D and BERT over ranks: measured against expected AU, throughput, staging."""
    lines = ["| workload | ranks | data | AU measured | AU expected | samples/s | MB/s "
             "| staging s | staging GB/s |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['workload']} | {r['ranks']} | {r['where']} | {fmt(r['au'], '.3f')} "
              f"| {fmt(r['expected'], '.3f')} | {fmt(r['samples_per_s'], '.1f')} "
              f"| {fmt(r['mb_per_s'], '.1f')} | {fmt(r['stage_s'], '.1f')} "
              f"| {fmt(r['stage_gbps'], '.3f')} |" for r in rows]
    return "\n".join(lines)


def layout_table(rows: list[dict[str, Any]]) -> str:
    """The layout comparison (2 ranks) on both tiers."""
    lines = ["| layout | data | ranks | compute s | AU measured | AU expected | samples/s "
             "| MB/s | wait p99 ms |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['layout']} | {r['where']} | {r['ranks']} | {r['compute']:g} "
              f"| {fmt(r['au'], '.3f')} "
              f"| {fmt(r['expected'], '.3f')} | {fmt(r['samples_per_s'], '.1f')} "
              f"| {fmt(r['mb_per_s'], '.1f')} | {fmt(r['wait_p99_ms'], '.1f')} |"
              for r in rows]
    return "\n".join(lines)


def write_report(folders: list[Path], out: Path, timeline_run: str | None) -> list[str]:
    """`dliobench report` of some sweeps into ``out``; drop a large report.html."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.png"), out / "runs.csv", out / "report.html"]:
        old.unlink(missing_ok=True)
    cmd = [*DLIOBENCH, "report", *map(str, folders), "-o", str(out)]
    sh(cmd + (["--timeline-run", timeline_run] if timeline_run else []))
    html = out / "report.html"
    if html.exists() and html.stat().st_size > HTML_LIMIT:
        print(f"{html} is {html.stat().st_size / 1e6:.1f} MB: not kept", file=sys.stderr)
        html.unlink()
    return sorted(p.name for p in out.iterdir())


def write_reports(folders: list[tuple[str, Path]], out: Path,
                  rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """One report per group of sweeps (scaling, layouts); the timeline drawn in
    the scaling report is UNet3D's on the capped tier at the most ranks."""
    unet = [r for r in rows if r["case"] == "unet3d-capped"]
    worst = max(unet, key=lambda r: r["ranks"])["run_id"] if unet else None
    kept = {}
    for group in dict.fromkeys(g for g, _ in folders):
        kept[group] = write_report([f for g, f in folders if g == group], out / group,
                                   worst if group == "scaling" else None)
    return kept


def machine() -> str:
    """Machine and load, for the record (other processes may share the CPUs)."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {platform.node()}, nproc "
            f"{os.cpu_count()}, {mem:.1f} GiB, kernel {platform.release()}, load {load}")


def check_free(a: argparse.Namespace) -> None:
    """Refuse to start on a tier or local folder that already holds something."""
    for path in (a.tier, a.local):
        if path.exists() and any(path.iterdir()):
            sys.exit(f"{path} exists and is not empty: choose another --tier/--local")
    if Path(f"{a.tier}.img").exists():
        sys.exit(f"{a.tier}.img exists: is another slow tier up there? (slowdisk.sh down)")


def teardown(a: argparse.Namespace) -> None:
    """Unmount and delete the capped tier, remove the local datasets and staged copies."""
    subprocess.run(["bash", str(a.slowdisk), "down", str(a.tier)], check=False)
    shutil.rmtree(a.local, ignore_errors=True)


def bring_up(a: argparse.Namespace) -> None:
    """Create the capped tier, or stop with slowdisk's exit code 3 where it cannot work."""
    rc = subprocess.run(["bash", str(a.slowdisk), "up", str(a.tier), str(a.size_mb),
                         str(a.cap_mbps)]).returncode
    if rc == 3:
        sys.exit(3)
    if rc != 0:
        raise RuntimeError(f"slowdisk.sh up failed with exit code {rc}")
    a.local.mkdir(parents=True, exist_ok=True)


def measure(a: argparse.Namespace,
            work: Path) -> tuple[list[dict[str, Any]], list[tuple[str, Path]]]:
    """Generate, run every sweep; one row per run, and (report group, sweep folder) pairs."""
    local_bps = probe_read_bps(a.local)
    print(f"local disk, one O_DIRECT stream of 8 MiB reads: {local_bps / 1e9:.3f} GB/s",
          flush=True)
    t0 = time.monotonic()
    generate_all(a, REPO / "configs" / "layout_comparison.yaml")
    print(f"datasets generated in {time.monotonic() - t0:.0f} s", flush=True)
    rows: list[dict[str, Any]] = []
    folders: list[tuple[str, Path]] = []
    cases = scaling_cases(a, work, local_bps)
    cases += [] if a.no_layouts else layout_cases(a, work, local_bps)
    for case in cases:
        folder = run_case(case, a, work)
        rows += collect(case, folder)
        folders += [(case.report, folder)] if folder else []
    return rows, folders


def main(argv: list[str] | None = None) -> int:
    """Bring up the tier, measure, tabulate, report, tear down."""
    a = parse_args(argv)
    check_free(a)
    work = a.work_dir or Path(tempfile.mkdtemp(prefix="tiers-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# storage tiers, read cap B = {a.cap_mbps} MB/s\n\nstart: {machine()}", flush=True)
    started = time.monotonic()
    try:
        bring_up(a)
        rows, folders = measure(a, work)
    finally:
        teardown(a)
    (work / "rows.json").write_text(json.dumps(rows, indent=1))
    print("\n" + formula_line(rows, a.cap_mbps))
    print("\n" + scaling_table([r for r in rows if not r["case"].startswith("layout")]))
    if layouts := [r for r in rows if r["case"].startswith("layout")]:
        print("\n" + layout_table(sorted(layouts, key=lambda r: (-r["compute"], r["where"]))))
    kept = write_reports(folders, a.out, rows)
    print(f"\nend: {machine()}; {(time.monotonic() - started) / 60:.1f} min")
    print(f"sweeps (results only): {work / 'sweeps'}")
    for group, names in kept.items():
        print(f"report files in {a.out / group}: {', '.join(names)}")
    return 0 if all(r["status"] == "complete" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
