"""mlpstorage's later subcommands (``mlpstorage_py/cli/{init,config,status,submit,lockfile,
runs,utility}_args.py`` in mlcommons/storage's newest CLI): each runs here, or is refused in
one sentence saying what to do instead. (``vectordb`` is dliobench's own subcommand,
``cli/vectordb_args.py``, also under ``mlpstorage``.)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from dliobench import __version__
from dliobench.base.errors import ConfigError

Commands = Mapping[str, Callable[[argparse.Namespace], int]]

REFUSED: dict[str, str] = {
    "init": "mlpstorage init writes mlpstorage's own configuration, and dliobench needs none: "
            "run `dliobench training run ...` directly and keep settings in a workload YAML "
            "(`dliobench show-config W` prints one)",
    "config": "mlpstorage config edits mlpstorage's layered configuration; dliobench's is the "
              "workload YAML and KEY=VALUE overrides: `dliobench show-config W` prints it and "
              "`dliobench keys` lists every key",
    "status": "mlpstorage status reports its environment checks; dliobench checks folders, "
              "memory and its extras before every run, so run the command (add --what-if to "
              "see what it would run)",
    "submit": "mlpstorage submit packages a submission, which dliobench does not do: judge "
              "the results with `dliobench check RESULTS_DIR`, then package them with "
              "mlpstorage's tools",
    "lockfile": "mlpstorage lockfile pins its Python packages; every dliobench result.json "
                "records the dliobench version and commit that made it, so leave it out",
    "runs": "mlpstorage runs lists its runs; `dliobench report RESULTS_DIR` lists and compares "
            "every run below a folder",
    "history": "mlpstorage history replays its own command history and dliobench keeps "
               "none: every run's result.json records the command line that made it "
               "(provenance), and your shell's history has it",
}


def _refuse(name: str) -> Callable[[argparse.Namespace], int]:
    def refuse(_args: argparse.Namespace) -> int:
        raise ConfigError(REFUSED[name])

    return refuse


def _version(_args: argparse.Namespace) -> int:
    print(f"dliobench {__version__}")
    return 0


def add_parsers(sub: Any, top: bool) -> None:
    """The later subcommands (at the top level only those whose name dliobench does not
    use otherwise), each taking whatever follows it."""
    for name in REFUSED:
        p = sub.add_parser(name, help=f"mlpstorage's {name}: refused, says what to do instead")
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=_refuse(name))
    if not top:
        p = sub.add_parser("version", help="the dliobench version (mlpstorage version)")
        p.set_defaults(func=_version)
