"""The front door: mlpstorage's command lines run as our commands.

``dliobench training run --model unet3d --accelerator-type b200 ...`` (and the same under
``dliobench mlpstorage``) parses mlpstorage's flags (``cli/mlpstorage_args.py``), translates
them onto our workloads and keys (``config/mlpstorage.py``) and calls our own command's
function (run, generate, datasize, show-config, report) with the arguments it would have had
from our own command line, so there is one implementation of each command. Runs go where
``--results-dir`` says, laid out as mlpstorage lays them out (``output.layout=mlpstorage``).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import dliobench.cli.kvcache_args as kvcache_args
import dliobench.cli.mlpstorage_args as mlpstorage_args
import dliobench.cli.mlpstorage_later as mlpstorage_later
import dliobench.cli.vectordb_args as vectordb_args
from dliobench.base.errors import ConfigError
from dliobench.comm.local_launch import MpiOptions, launched_ranks, start_or_join
from dliobench.config import mlpstorage as mlps
from dliobench.config.mlps_storage import dotenv, object_overrides, translate_params

log = logging.getLogger("dliobench")
Commands = Mapping[str, Callable[[argparse.Namespace], int]]
def _refuse(args: argparse.Namespace) -> None:
    """A ConfigError for the first flag given that means nothing here (one sentence)."""
    given = [d for d in ("dlio_bin_path", "config_file", "verify_lockfile",
                         "timeseries") if getattr(args, d, None)]
    given += ["exec_type"] if getattr(args, "exec_type", "mpi") == "docker" else []
    if getattr(args, "loops", 1) < 1:
        raise ConfigError(f"--loops {args.loops}: give 1 or more runs")
    sentence = mlps.refusal(given)
    if sentence:
        raise ConfigError(sentence)
    if getattr(args, "ssh_username", None) and not mlps.remote_hosts(getattr(args, "hosts",
                                                                          None)):
        raise ConfigError("--ssh-username logs in to the hosts --hosts names, and it names "
                          "no other host; name them (--hosts h1 h2) or leave the flag out")


def _launch(args: argparse.Namespace, asked: int | None, flag: str,
            ns: argparse.Namespace) -> int | None:
    """Start ``asked`` ranks on this host when no launcher did (their exit status), or
    None to go on as this rank (``--what-if``: nothing runs, nothing is started). With
    ``--hosts`` naming other hosts and no launcher, ``ns`` carries the launch across them
    (``cli.hosts``: started by ``run`` once the configuration is resolved)."""
    if args.what_if:
        return None
    options = MpiOptions.parse(args.mpi_bin, args.mpi_params, args.mpi_btl,
                               args.allow_run_as_root, args.oversubscribe)
    typed = getattr(args, "typed_argv", sys.argv[1:])
    if mlps.remote_hosts(getattr(args, "hosts", None)):
        from dliobench.cli.hosts import HostsAsked, host_names, wanted

        across = HostsAsked(host_names(args.hosts), total=asked, ssh_user=args.ssh_username,
                            options=options)
        if wanted(across):
            ns.hosts_asked, ns.typed_argv = across, typed
            return None
    return start_or_join(asked, typed, options, flag)


def _ours(args: argparse.Namespace, workload: str, overrides: list[str],
          **extra: Any) -> argparse.Namespace:
    """The arguments our own command would have had: the workload, the overrides (mlpstorage's
    --params first, then what its other flags set), and the rest of our options."""
    items = [workload, *translate_params(mlps.flat_params(getattr(args, "params", None))),
             *_storage(args), *overrides]
    accel = getattr(args, "accelerator_type", None)
    log.debug("as dliobench: %s", shlex.join(
        ["dliobench", "...", *items, *(["--accelerator", accel] if accel else [])]))
    base = dict(workload=items, accelerator=accel, config_dir=None, output=None,
                dataset=None, launcher="auto", no_progress=False, yes=False, trace=False,
                fail_below_floor=False, repeat=None, run_set=False,
                verbose=getattr(args, "verbose", False))
    return argparse.Namespace(**{**base, **extra})


def _storage(args: argparse.Namespace) -> list[str]:
    """``--object`` (or the positional ``object``): S3 from upstream's variables; the
    ``AWS_*`` ones of ``./.env`` join the environment (ours and the ranks'), where our S3
    client reads them, as upstream reads ``.env``."""
    if not getattr(args, "object", None):
        return []
    for key, value in dotenv().items():
        if key.startswith("AWS_"):
            os.environ.setdefault(key, value)
    return object_overrides()


def _results(args: argparse.Namespace) -> list[str]:
    """Where runs go: --results-dir, laid out as mlpstorage lays it out (checked as every
    output.folder is)."""
    return [mlps.path_item("output.folder", args.results_dir), "output.layout=mlpstorage"]


def _data(args: argparse.Namespace) -> list[str]:
    """--data-dir as mlpstorage reads it: the data folder ``<dir>/<model>``; --o-direct:
    reads that bypass the page cache."""
    odirect = ["reader.odirect=true"] if getattr(args, "o_direct", False) else []
    if not args.data_dir:
        return odirect
    return [mlps.path_item("dataset.data_folder", mlps.data_folder(args.data_dir, args.model)),
            *odirect]


def _run_or_show(commands: Commands, args: argparse.Namespace, ns: argparse.Namespace) -> int:
    """``--what-if``: the resolved configuration; otherwise the run."""
    return commands["show-config" if args.what_if else "run"](ns)


def _memory_note(args: argparse.Namespace) -> None:
    """A run records the memory it measures, and `check` judges the 5x rule by it: say so
    when the flag gives less than this host has (a dataset sized by the flag falls short)."""
    from dliobench.results.sysinfo import host_memory_bytes

    given, measured = args.client_host_memory_in_gb, host_memory_bytes() / 2**30
    if given and given < 0.9 * measured:
        log.warning("--client-host-memory-in-gb %s is less than this host's %.0f GiB; the "
                    "run records the measured memory, and `dliobench check` judges the "
                    "dataset against 5x that", given, measured)


def training_run(commands: Commands, args: argparse.Namespace) -> int:
    """``training run``: our run of the model's workload, in mlpstorage's results layout."""
    _refuse(args)
    folder = [mlps.path_item("checkpoint.checkpoint_folder", os.path.join(
        args.checkpoint_folder, args.model))] if args.checkpoint_folder else []
    ns = _ours(args, args.model, [*_data(args), *folder, *_results(args)],
               repeat=args.loops - 1 or None)
    started = _launch(args, args.num_accelerators, "--num-accelerators", ns)
    if started is not None:
        return started
    _memory_note(args)
    return _run_or_show(commands, args, ns)


def training_datagen(commands: Commands, args: argparse.Namespace) -> int:
    """``training datagen``: our generate (the command is the confirmation to write), its
    record in mlpstorage's ``<results-dir>/training/<model>/datagen/<stamp>/``."""
    _refuse(args)
    if (args.num_processes or 1) > launched_ranks():
        log.info("--num-processes %s: dliobench writes with one process per core (under "
                 "mpiexec the ranks split the files)", args.num_processes)
    ns = _ours(args, args.model, [*_data(args), *_results(args)], yes=True, verify=False)
    return commands["show-config" if args.what_if else "generate"](ns)


def training_datasize(commands: Commands, args: argparse.Namespace) -> int:
    """``training datasize``: our datasize for the accelerators, hosts and memory given."""
    _refuse(args)
    ns = _ours(args, args.model, [], accelerators=args.max_accelerators,
               hosts=args.num_client_hosts, host_memory_gb=args.client_host_memory_in_gb)
    return commands["datasize"](ns)


def _checkpoint_args(args: argparse.Namespace) -> list[str]:
    """Our overrides for mlpstorage's checkpointing flags (the ranks asked for, or those
    launched)."""
    processes = args.num_processes or launched_ranks()
    return [*mlps.checkpoint_overrides(args.model, processes, args.checkpoint_folder,
                                       args.num_checkpoints_write, args.num_checkpoints_read),
            *_results(args)]


def checkpointing_run(commands: Commands, args: argparse.Namespace) -> int:
    """``checkpointing run``: our llama3 checkpoint workload, in mlpstorage's layout."""
    _refuse(args)
    ns = _ours(args, mlps.workload_of(args.model), _checkpoint_args(args),
               repeat=args.loops if args.loops > 1 else None)
    if not args.what_if:  # a read-only invocation's checkpoints, before any rank starts
        from dliobench.run.checkpoint.split import refuse_missing

        refuse_missing(ns.workload, args.num_processes or launched_ranks())
    started = _launch(args, args.num_processes, "--num-processes", ns)
    if started is not None:
        return started
    _memory_note(args)
    return _run_or_show(commands, args, ns)


def checkpointing_datasize(commands: Commands, args: argparse.Namespace) -> int:
    """``checkpointing datasize``: the checkpoint's layout and bytes, and the run's totals."""
    from dliobench.config import load
    from dliobench.config.hydra import split
    from dliobench.run.checkpoint.layout import describe, layout_for

    _refuse(args)
    ns = _ours(args, mlps.workload_of(args.model), _checkpoint_args(args))
    line = split(ns.workload, "default")
    config, _ = load.load(line.path, line.overrides)
    processes = args.num_processes or launched_ranks()
    layout = layout_for(config, processes)
    for text in describe(layout):
        print(text)
    subset = config.checkpoint.mode == "subset" and processes < layout.world
    total = sum(layout.totals(range(processes) if subset else None))
    what = f"the share of {processes} of its {layout.world} ranks" if subset else "all of it"
    print(f"{args.num_checkpoints_write} writes and {args.num_checkpoints_read} reads of the "
          f"checkpoint ({what}): {args.num_checkpoints_write * total / 1e9:,.2f} GB written, "
          f"{args.num_checkpoints_read * total / 1e9:,.2f} GB read")
    return 0


def reportgen(commands: Commands, args: argparse.Namespace) -> int:
    """``reports reportgen``: as mlpstorage's, each run's CLOSED/OPEN/INVALID and
    ``results.json``/``results.csv`` in --results-dir (``report.mlpstorage_report``), then our
    report of the same runs."""
    from dliobench.report.mlpstorage_report import reportgen as upstream_reportgen

    _refuse(args)
    upstream_reportgen(args.results_dir)
    return commands["report"](argparse.Namespace(runs=[args.results_dir], out=args.output_dir,
                                                 timeline_run=None, trace=False))


def validate(args: argparse.Namespace) -> int:
    """``validate``: upstream runs its submission checker on a results folder; we run our
    ``check`` of the runs under it (``report.mlpstorage_report.validate``)."""
    from dliobench.report.mlpstorage_report import validate as check_folder

    return check_folder(args.results_dir, args.division)


def _add_validate(target: Any) -> None:
    """``validate --results-dir DIR`` (``--input DIR``, the submission checker's flag),
    unless a parser of that name is there already."""
    if "validate" in (getattr(target, "choices", None) or {}):
        return
    p = target.add_parser("validate", help="MLPerf Storage's rules on the runs under a "
                          "results folder (dliobench check)")
    p.add_argument("--results-dir", "-rd", "--input", dest="results_dir", required=True,
                   metavar="DIR", help="the folder the runs were written to")
    p.add_argument("--division", choices=("closed", "open"), default="closed")
    p.set_defaults(func=validate)


HANDLERS = {"training run": training_run, "training datagen": training_datagen,
            "training datasize": training_datasize, "checkpointing run": checkpointing_run,
            "checkpointing datasize": checkpointing_datasize, "reports reportgen": reportgen}


def _table() -> str:
    """The epilog of ``dliobench mlpstorage --help``: what is refused, and why."""
    lines = [f"mlpstorage's command lines, read at {mlps.UPSTREAM}, translated onto "
             "dliobench's commands and keys (docs/mlpstorage.md has the table):"]
    lines += [f"  {words}: {ours}" for words, ours in mlps.ACCEPTED]
    lines.append("Refused, exit 2:")
    lines += [f"  {r.flags}: {r.instead}" for r in mlps.REFUSED]
    lines.append("  --ssh-username without --hosts naming other hosts: name the hosts")
    return "\n".join(lines)


def add_parsers(sub: Any, commands: Commands) -> None:
    """``training``, ``checkpointing`` and ``reports`` as top-level subcommands, and the same
    under ``mlpstorage``, whose --help lists what is accepted and what is refused."""
    handlers = {name: partial(fn, commands) for name, fn in HANDLERS.items()}
    door = sub.add_parser("mlpstorage", help="mlpstorage's command lines (training, "
                          "checkpointing, reports), run by dliobench",
                          description="Run mlpstorage's command lines with dliobench: "
                          "`dliobench mlpstorage training run ...` or `dliobench training "
                          "run ...`. Each subcommand's --help says what every flag becomes.",
                          epilog=_table(), formatter_class=argparse.RawDescriptionHelpFormatter)
    inner = door.add_subparsers(dest="mlps_benchmark", metavar="BENCHMARK", required=True)
    for target in (sub, inner):
        mlpstorage_args.add_training(target, handlers)
        mlpstorage_args.add_checkpointing(target, handlers)
        mlpstorage_args.add_reports(target, handlers)
        _add_validate(target)
        mlpstorage_later.add_parsers(target, target is sub)
    kvcache_args.add_parser(inner, commands)  # `mlpstorage kvcache ...` as `kvcache ...`
    vectordb_args.add_parser(inner, commands)  # `mlpstorage vectordb ...` as `vectordb ...`
