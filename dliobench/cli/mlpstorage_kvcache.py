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
- ``validate``: ``dliobench check`` of the runs below ``--results-dir``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import Any

from dliobench.base.errors import ConfigError

Commands = Mapping[str, Callable[[argparse.Namespace], int]]
VERBS = ("run", "datasize", "validate")
PLANNING_CONTEXT_TOKENS = 8192  # kv_cache_benchmark/README.md@dfe7b1f, "Peak In-Flight RAM"
NO_EFFECT = ("--trials", "--inter-option-delay", "--npernode", "--loops", "--rag-num-docs",
             "--stream-log-level")


def add_args(p: argparse.ArgumentParser) -> None:
    """mlpstorage's own flags of ``kvcache run|datasize``, beside kv-cache.py's."""
    from dliobench.cli.mlpstorage_args import _hosts_and_mpi

    _hosts_and_mpi(p)
    p.add_argument("--results-dir", "-rd", metavar="DIR",
                   help="mlpstorage kvcache: the root folder of results (output.folder)")
    p.add_argument("--num-processes", "-np", type=int, metavar="N",
                   help="ranks: started on this host with the mpi extra's mpiexec, or as "
                   "many as a launcher started")
    for flag in NO_EFFECT:
        p.add_argument(flag, metavar="N", help="accepted, no effect (one run per invocation)")
    p.add_argument("--enable-rag", action="store_true", help="refused: no RAG documents here")
    p.add_argument("--config", metavar="YAML", help="kv-cache.py's config.yaml: not read "
                   "(dliobench's kvcache.* keys hold those settings: dliobench keys kvcache)")
    p.add_argument("--kvcache-bin-path", help="refused: no kv-cache.py runs")
    p.add_argument("--what-if", "--dry-run", dest="what_if", action="store_true",
                   help="print the resolved configuration and run nothing")
    for flag in ("--closed", "--open", "--skip-validation", "--allow-invalid-params",
                 "--debug", "--quiet", "--skip-timeseries"):
        p.add_argument(flag, action="store_true", help="accepted, no effect")


def front_door(commands: Commands, args: argparse.Namespace) -> int | None:
    """Run a verb's work, or prepare ``args`` for our kvcache run and return None (or the
    exit status of the ranks started here)."""
    for dest, flag in (("kvcache_bin_path", "--kvcache-bin-path"), ("enable_rag",
                                                                    "--enable-rag")):
        if getattr(args, dest, None):
            raise ConfigError(f"mlpstorage kvcache's {flag} has no meaning in dliobench, which "
                              "runs no kv-cache.py and emulates no RAG documents; leave it out")
    verb = args.workload[0] if args.workload[:1] and args.workload[0] in VERBS else None
    if verb:
        args.workload = args.workload[1:]
    if args.results_dir and not args.kv_output:
        args.kv_output = args.results_dir
    if verb == "validate":
        if not args.results_dir:
            raise ConfigError("kvcache validate needs --results-dir DIR, the folder of the "
                              "runs to check")
        return commands["check"](argparse.Namespace(
            runs=[args.results_dir], division="open" if args.open else "closed", json=False))
    if verb == "datasize":
        return _datasize(args)
    return None if args.what_if else _launch(args)


def _launch(args: argparse.Namespace) -> int | None:
    """Start ``--num-processes`` ranks here when no launcher did."""
    from dliobench.comm.local_launch import MpiOptions, start_or_join

    options = MpiOptions.parse(args.mpi_bin, args.mpi_params, args.mpi_btl,
                               args.allow_run_as_root, args.oversubscribe)
    return start_or_join(args.num_processes, getattr(args, "argv", sys.argv[1:]), options,
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
