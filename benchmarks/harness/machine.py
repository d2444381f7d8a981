"""What every benchmark report states about itself (the machine, the commit measured, the load),
and the cache drop before each run."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cmd: list[str], src: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command (in ``src`` with it on PYTHONPATH when given); raise with its output."""
    env = {**os.environ, "LC_ALL": "C", **({"PYTHONPATH": src} if src else {})}
    proc = subprocess.run(cmd, cwd=src or REPO, capture_output=True, text=True, env=env,
                          check=False)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc


def _out(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()


def machine_facts() -> dict[str, object]:
    """The machine, as a JSON record and the report's line give it."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"node": platform.node(), "cpus": os.cpu_count(), "mem_gib": round(mem / 2**30, 1),
            "platform": platform.platform(), "python": platform.python_version()}


def machine_lines() -> list[str]:
    """Markdown lines: date and machine."""
    m = machine_facts()
    return [f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"- machine: {m['node']}, {m['cpus']} CPUs, {m['mem_gib']:.1f} GiB RAM, "
            f"{m['platform']}, Python {m['python']}"]


def commit_of(src: str | Path) -> tuple[str, bool]:
    """The commit checked out in ``src`` (empty outside git), and whether its dliobench/ has
    uncommitted changes."""
    commit = _out(["git", "-C", str(src), "rev-parse", "HEAD"])
    dirty = _out(["git", "-C", str(src), "status", "--porcelain", "dliobench"])
    return commit, bool(dirty)


def command() -> list[str]:
    """This process's command line as one reruns it: ``python -m benchmarks.<folder>.<script>``
    for a benchmark started as a module (``sys.argv[0]`` is then its file's path)."""
    script = Path(sys.argv[0]).resolve()
    bench = REPO / "benchmarks"
    if script.suffix == ".py" and bench in script.parents:
        module = ".".join(script.relative_to(REPO).with_suffix("").parts)
        return [Path(sys.executable).name, "-m", module, *sys.argv[1:]]
    return [Path(sys.executable).name, *sys.argv]


def code_lines(src: str | Path) -> list[str]:
    """Markdown lines: the command that ran, and the dliobench commit measured in ``src``."""
    commit = _out(["git", "-C", str(src), "log", "-1", "--format=%h (%cI)"])
    dirty = commit_of(src)[1]
    return [f"- measured with: `{' '.join(command())}`",
            f"- dliobench: {src}, commit {commit}"
            f"{' with uncommitted changes in dliobench/' if dirty else ''}"]


def load_line() -> str:
    """Markdown line: the load average when the report was made."""
    return f"- load at the end: `{_out(['uptime'])}`"


def drop_caches() -> None:
    """Flush dirty pages and drop the page cache (warn if not root)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        print(f"warning: cannot drop caches ({exc}); run as root", file=sys.stderr)
