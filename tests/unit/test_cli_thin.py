"""The command line stays thin: its commands are a few lines each, calling the layer that
does the work, and ``dliobench --help`` starts without the heavy libraries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

MAIN = Path(__file__).resolve().parents[2] / "dliobench" / "cli" / "main.py"
HEAVY = ("numpy", "mpi4py", "torch", "pyarrow", "matplotlib", "nvidia.dali", "h5py", "PIL")
PROBE = ("import sys\nfrom dliobench.cli import main\n"
         "for argv in (['--help'], ['run', '--help'], ['sweep', '--help']):\n"
         "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
         f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
MOST_LINES = 10  # a command's body: load the configuration, call one function, show it


def test_help_imports_no_heavy_library() -> None:
    """numpy alone took half of the start-up of `dliobench --help` (through comm.world)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120, check=True)
    assert "usage: dliobench" in done.stdout
    assert done.stdout.splitlines()[-1] == ""  # no heavy module was imported


def test_every_command_is_a_few_lines() -> None:
    """Each ``cmd_*`` is at most ``MOST_LINES`` lines below its docstring: the work is in
    ``run.commands``, ``report.commands`` and ``report.sweep_command``."""
    tree = ast.parse(MAIN.read_text())
    commands = [f for f in tree.body if isinstance(f, ast.FunctionDef)
                and f.name.startswith("cmd_")]
    assert len(commands) >= 12
    long = {f.name: f.end_lineno - f.body[1].lineno + 1 for f in commands
            if f.end_lineno is not None and f.end_lineno - f.body[1].lineno + 1 > MOST_LINES}
    assert not long, long
