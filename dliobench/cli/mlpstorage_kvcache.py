"""``mlpstorage kvcache run|datasize|validate``: mlpstorage's KV-cache commands on our
``dliobench kvcache``.

Upstream's flags are read at mlcommons/storage ``mlpstorage_py/cli/kvcache_args.py``@dfe7b1f
(``add_kvcache_arguments``): the cache flags are kv-cache.py's, which ``dliobench kvcache``
already takes (``config.kvcache_keys.UPSTREAM_FLAGS``); this module adds mlpstorage's own
(``--results-dir``, hosts and MPI, trials, the universal ones) and the verbs:

- ``run``: our kvcache run, its result folder below ``--results-dir``; ``--num-processes N``
  starts N ranks on this host when no launcher did (``comm.local_launch``).
- ``datasize``: the model's KV bytes per token and what ``--num-users`` users hold at
  upstream's planning context of 8,192 tokens (``kv_cache_benchmark/README.md``@dfe7b1f,
  "Peak In-Flight RAM": ``max_concurrent_allocs x avg_context_tokens x bytes_per_token``).
- ``validate``: ``dliobench check`` of the runs below ``--results-dir``, as mlpstorage's
  ``validate`` (``report.mlpstorage_report.validate``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dliobench.base.errors import ConfigError

VERBS = ("run", "datasize", "validate")
PLANNING_CONTEXT_TOKENS = 8192  # kv_cache_benchmark/README.md@dfe7b1f, "Peak In-Flight RAM"
NO_EFFECT = ("--trials", "--inter-option-delay", "--loops", "--rag-num-docs",
             "--stream-log-level")
REFUSED_HERE = {"kvcache_bin_path": "--kvcache-bin-path: dliobench runs no kv-cache.py",
                "enable_rag": "--enable-rag: dliobench emulates no RAG documents",
                "object": "--object: the KV cache is POSIX storage, as upstream's kvcache "
                          "refuses it too"}


def add_args(p: argparse.ArgumentParser) -> None:
    """mlpstorage's own flags of ``kvcache run|datasize`` (``kvcache_args.py``@dfe7b1f and
    the universal ones of ``common_args.py``), beside kv-cache.py's."""
    from dliobench.cli.mlpstorage_args import _hosts_and_mpi, _timeseries

    _hosts_and_mpi(p)
    _timeseries(p)
    p.add_argument("--results-dir", "-rd", metavar="DIR",
                   help="mlpstorage kvcache: the root folder of results (output.folder)")
    p.add_argument("--num-processes", "-np", type=int, metavar="N",
                   help="ranks: started on this host with the mpi extra's mpiexec, or as "
                   "many as a launcher started")
    p.add_argument("--npernode", "--num-processes-per-client", metavar="N",
                   help="accepted: ranks per host (one host here)")
    for flag in NO_EFFECT:
        p.add_argument(flag, metavar="N", help="accepted, no effect (one run per invocation)")
    p.add_argument("--config", metavar="YAML", help="kv-cache.py's config.yaml: not read "
                   "(dliobench's kvcache.* keys hold those settings: dliobench keys kvcache)")
    p.add_argument("--config-file", "-c", help="refused: use a workload file or KEY=VALUE")
    p.add_argument("--verify-lockfile", help="refused: result.json records the version")
    p.add_argument("--kvcache-bin-path", help="refused: no kv-cache.py runs")
    p.add_argument("--enable-rag", action="store_true", help="refused: no RAG documents here")
    p.add_argument("--object", nargs="?", const="s3", help="refused: POSIX storage only")
    p.add_argument("--what-if", "--dry-run", dest="what_if", action="store_true",
                   help="print the resolved configuration and run nothing")
    p.add_argument("--debug", "--verbose", dest="verbose", action="store_true",
                   default=argparse.SUPPRESS, help="log debug messages (dliobench -v)")
    for flag in ("--closed", "--open", "--file", "--skip-validation", "--allow-invalid-params",
                 "--quiet"):
        p.add_argument(flag, action="store_true", help="accepted, no effect")


def _refuse(args: argparse.Namespace) -> None:
    """One sentence for the first flag given that means nothing here."""
    from dliobench.comm.local_launch import launched_ranks
    from dliobench.config import mlpstorage as mlps

    for dest, why in REFUSED_HERE.items():
        if getattr(args, dest, None):
            raise ConfigError(f"mlpstorage kvcache's {why}; leave it out")
    given = [d for d in ("ssh_username", "config_file", "verify_lockfile", "timeseries")
             if getattr(args, d, None)]
    given += ["exec_type"] if args.exec_type == "docker" else []
    sentence = mlps.refusal(given)
    remote = mlps.remote_hosts(args.hosts) if launched_ranks() == 1 else []
    if not sentence and remote:
        sentence = (f"--hosts names other hosts ({', '.join(remote)}): start the ranks there "
                    f"with `mpiexec -hosts {','.join(remote)} -n N dliobench kvcache ...` or "
                    "srun")
    if sentence:
        raise ConfigError(sentence)


def front_door(args: argparse.Namespace) -> int | None:
    """Run a verb's work, or prepare ``args`` for our kvcache run and return None (or the
    exit status of the ranks started here)."""
    _refuse(args)
    verb = args.workload[0] if args.workload[:1] and args.workload[0] in VERBS else None
    if verb:
        args.workload = args.workload[1:]
    if args.results_dir and not args.kv_output:
        args.kv_output = args.results_dir
    if verb == "validate":
        if not args.results_dir:
            raise ConfigError("kvcache validate needs --results-dir DIR, the folder of the "
                              "runs to check")
        from dliobench.report.mlpstorage_report import validate

        return validate(args.results_dir, "open" if args.open else "closed")
    if verb == "datasize":
        return _datasize(args)
    return None if args.what_if else _launch(args)


def _launch(args: argparse.Namespace) -> int | None:
    """Start ``--num-processes`` ranks here when no launcher did."""
    from dliobench.comm.local_launch import MpiOptions, start_or_join

    options = MpiOptions.parse(args.mpi_bin, args.mpi_params, args.mpi_btl,
                               args.allow_run_as_root, args.oversubscribe)
    return start_or_join(args.num_processes, getattr(args, "typed_argv", sys.argv[1:]), options,
                         "--num-processes")


def _datasize(args: Any) -> int:
    """Print the model's KV bytes per token and the users' cache at the planning context."""
    from dliobench.config.kvcache_keys import KVCacheConfig
    from dliobench.run.kvcache.models import PRESETS

    model = args.kv_model or KVCacheConfig().model
    if model not in PRESETS:
        raise ConfigError(f"--model {model} is not one of the KV-cache models; give one of "
                          f"{', '.join(PRESETS)}")
    users = int(args.kv_num_users or KVCacheConfig().num_users)
    per_token = PRESETS[model].kv_bytes_per_token
    total = users * PLANNING_CONTEXT_TOKENS * per_token
    print(f"{model}: {per_token:,} bytes of KV cache per token; {users} users at "
          f"{PLANNING_CONTEXT_TOKENS:,} tokens each hold {total / 1e9:,.2f} GB")
    return 0
