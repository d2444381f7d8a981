"""Ranks on other hosts, started from this one over ssh (issue 51, part 3; not wired into
``run`` yet: ``run_on_hosts`` is the hook the launcher calls for ``--hosts``).

Placement follows mlpstorage's ``generate_mpi_prefix_cmd`` (mlcommons/storage
mlpstorage/utils.py@caa90c9c7d6a543de815222fff834a846823f922): hosts given as ``host:slots``
keep their slots (which must hold every rank); plain hosts share the N ranks evenly, the
first N mod H hosts taking one more. ``--ranks-per-host P`` puts P on each.

The ranks start through the bundled MPICH's Hydra with its ssh launcher (``-launcher ssh``;
``--ssh-username`` through a one-line ``-launcher-exec`` wrapper) and
``-disable-auto-cleanup``, as ``dliobench nodes`` does: a host lost mid-run leaves the others
running to their next collective, where the stall watchdog names it and the partial result
is assembled from every rank's journal (docs/running-at-scale.md, "A node dies").

Before that, a preflight asks every host over ssh, one sentence per host for what is wrong:
unreachable, another dliobench version, the workload file or the data folder missing or its
manifest different, too little memory for its ranks, its clock more than ``CLOCK_SKEW_S``
off. The probe is a function, so tests may inject the answers emulated hosts share (memory,
clock).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dliobench import __version__
from dliobench.base.errors import InputError
from dliobench.comm.local_launch import MpiOptions, supervise

CLOCK_SKEW_S = 1.0
PROBES_AT_ONCE = 32
SSH_TIMEOUT_S = 20
# what a host answers, one line each: its clock, MemAvailable (KiB), whether it sees the data
# folder (1/0), the sha256 of the folder's manifest ("-" if none), its dliobench version, and
# which of the other paths it was asked about (the workload file) it does not see
PROBE = """import hashlib, os, sys, time
import dliobench
folder, manifest = sys.argv[1], os.path.join(sys.argv[1], sys.argv[2])
print(time.time())
print(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemAvailable")))
print(int(os.path.isdir(folder)))
print(hashlib.sha256(open(manifest, "rb").read()).hexdigest() if os.path.exists(manifest) else "-")
print(dliobench.__version__)
print("\\0".join(p for p in sys.argv[3:] if not os.path.exists(p)))
"""


def place(hosts: list[str], total: int | None, per_host: int | None) -> list[tuple[str, int]]:
    """(host, ranks) for each host, as mlpstorage places ``total`` ranks (see above)."""
    if not hosts:
        raise InputError("--hosts names no host; give them as h1,h2,... (or h1:slots,...)")
    if per_host is not None:
        if per_host < 1:
            raise InputError(f"--ranks-per-host must be at least 1, not {per_host}")
        return [(h.split(":")[0], per_host) for h in hosts]
    if total is None or total < 1:
        raise InputError("--hosts needs --num-accelerators N (N ranks in all) or "
                         "--ranks-per-host P")
    if any(":" in h for h in hosts):
        bad = [h for h in hosts if not h.partition(":")[2].isdigit()]
        if bad:
            raise InputError(f"--hosts gives slots as host:N for every host or for none, "
                             f"not {', '.join(bad)}")
        slots = [(h.split(":")[0], int(h.split(":")[1])) for h in hosts]
        if sum(s for _, s in slots) < total:
            raise InputError(f"the hosts' slots ({sum(s for _, s in slots)}) cannot hold "
                             f"{total} ranks; give more slots or fewer accelerators")
        return slots
    base, extra = divmod(total, len(hosts))
    return [(h, base + (1 if i < extra else 0)) for i, h in enumerate(hosts)]


@dataclass(frozen=True)
class Answer:
    """What a host said to the probe (None: it did not answer, with ``error``)."""

    clock: float | None = None
    mem_available: int | None = None
    folder_seen: bool = False
    manifest_sha: str = "-"
    version: str = ""
    error: str = ""
    missing: tuple[str, ...] = ()


def ssh_probe(user: str | None, folder: str, manifest: str, paths: tuple[str, ...] = (),
              python: str = sys.executable) -> Callable[[str], Answer]:
    """The real probe: one ssh per host running ``PROBE`` with ``python`` (this one's path:
    every host has dliobench at the same path)."""
    def probe(host: str) -> Answer:
        target = f"{user}@{host}" if user else host
        cmd = shlex.join([python, "-c", PROBE, folder, manifest, *paths])
        try:
            done = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o",
                                   f"ConnectTimeout={SSH_TIMEOUT_S}", target, cmd],
                                  capture_output=True, text=True, timeout=SSH_TIMEOUT_S * 2,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Answer(error=str(exc))
        lines = done.stdout.split("\n")
        if done.returncode != 0 or len(lines) < 6:
            return Answer(error=" ".join(done.stderr.split()) or f"exit {done.returncode}")
        return Answer(float(lines[0]), int(lines[1]) * 1024, lines[2] == "1", lines[3],
                      lines[4].strip(), missing=tuple(p for p in lines[5].split("\0") if p))
    return probe


def preflight(placement: list[tuple[str, int]], probe: Callable[[str], Answer], folder: str,
              manifest: Path | None, bytes_per_rank: int) -> list[str]:
    """One sentence per host that cannot take its ranks (empty: all can); the hosts are
    asked ``PROBES_AT_ONCE`` at a time."""
    want_sha = hashlib.sha256(manifest.read_bytes()).hexdigest() \
        if manifest is not None and manifest.exists() else "-"
    def timed(host: str) -> tuple[Answer, float]:  # its answer and this host's clock then
        asked = time.time()
        answer = probe(host)
        return answer, (asked + time.time()) / 2

    with ThreadPoolExecutor(max_workers=min(PROBES_AT_ONCE, len(placement))) as pool:
        answers = list(pool.map(timed, [host for host, _ in placement]))
    problems = []
    for (host, ranks), (a, now) in zip(placement, answers, strict=True):
        if a.error:
            problems.append(f"{host}: unreachable over ssh ({a.error})")
        elif a.version != __version__:
            problems.append(f"{host}: runs dliobench {a.version or 'none'}, this host "
                            f"{__version__}; install the same version there")
        elif a.missing:
            problems.append(f"{host}: does not see {', '.join(a.missing)}; put it at the same "
                            "path on every host")
        elif not a.folder_seen:
            problems.append(f"{host}: does not see the data folder {folder}; mount it at the "
                            "same path on every host")
        elif a.manifest_sha != want_sha:
            problems.append(f"{host}: the data folder's manifest differs from this host's "
                            "(another dataset at that path)")
        elif a.mem_available is not None and a.mem_available < ranks * bytes_per_rank:
            problems.append(f"{host}: {a.mem_available / 2**30:.1f} GiB available, its "
                            f"{ranks} ranks need {ranks * bytes_per_rank / 2**30:.1f} GiB")
        elif a.clock is not None and abs(a.clock - now) > CLOCK_SKEW_S:
            problems.append(f"{host}: its clock is {a.clock - now:+.1f} s off this host's "
                            f"(more than {CLOCK_SKEW_S:g} s); synchronise it (chrony, NTP)")
    return problems


def mpiexec_over_ssh(mpiexec: str, placement: list[tuple[str, int]], argv: list[str],
                     launcher_exec: str | None = None,
                     mpi_args: tuple[str, ...] = ()) -> list[str]:
    """The one ``mpiexec`` that starts ``dliobench ARGV`` on every placed rank over ssh
    (``mpi_args``: the user's own mpiexec options, first)."""
    hosts = ",".join(f"{h}:{n}" for h, n in placement)
    wrapper = ["-launcher-exec", launcher_exec] if launcher_exec else []
    return [mpiexec, *mpi_args, "-launcher", "ssh", *wrapper, "-disable-auto-cleanup",
            "-hosts", hosts, "-n",
            str(sum(n for _, n in placement)), sys.executable, "-m", "dliobench", *argv]


def ssh_user_wrapper(folder: Path, user: str) -> str:
    """A ``-launcher-exec`` script that is ssh as ``user`` (``--ssh-username``)."""
    path = folder / "ssh-as-user.sh"
    path.write_text(f"#!/bin/sh\nexec ssh -l {shlex.quote(user)} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def launch_over_ssh(mpiexec: str, placement: list[tuple[str, int]], argv: list[str],
                    problems: list[str], launcher_exec: str | None = None,
                    options: MpiOptions | None = None) -> int:
    """Refuse with every host's sentence, else run the job; mpiexec's status. Ctrl-C (or
    SIGTERM) is forwarded to mpiexec as a local launch does (``local_launch.supervise``),
    and Hydra passes it to every host's ranks: they end as on Ctrl-C at home, rank 0
    keeping the partial result."""
    if problems:
        raise InputError("cannot start on every host: " + "; ".join(problems))
    options = options or MpiOptions()
    cmd = mpiexec_over_ssh(mpiexec, placement, argv, launcher_exec, options.params)
    return supervise(cmd, {**os.environ, **options.env})


def run_on_hosts(hosts: list[str], argv: list[str], *, total: int | None,
                 per_host: int | None, ssh_user: str | None, data_folder: str,
                 manifest: str, bytes_per_rank: int, mpiexec: str,
                 options: MpiOptions | None = None, paths: tuple[str, ...] = ()) -> int:
    """The hook ``run --hosts`` calls (outside Slurm: inside an allocation srun places the
    ranks and ``--hosts`` is not needed): place the ranks, ask every host, start them.

    ``manifest`` is the manifest's path inside the data folder; ``bytes_per_rank`` the
    memory a rank needs (``dataset/bounds.py``); ``mpiexec`` Hydra's launcher
    (``nodes.find_mpiexec``, as ``--mpi-bin`` names it); ``options`` the launch options of
    mlpstorage (``local_launch.MpiOptions``: ``--mpi-params`` first, ``--mpi-btl``'s
    environment); ``paths`` what else every host must see (the workload file, when it is
    one)."""
    placement = place(hosts, total, per_host)
    probe = ssh_probe(ssh_user, data_folder, manifest, paths)
    problems = preflight(placement, probe, data_folder, Path(data_folder) / manifest,
                         bytes_per_rank)
    with tempfile.TemporaryDirectory(prefix="dliobench-hosts-") as folder:
        wrapper = ssh_user_wrapper(Path(folder), ssh_user) if ssh_user else None
        return launch_over_ssh(mpiexec, placement, argv, problems, wrapper, options)
