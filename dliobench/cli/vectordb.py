"""`dliobench vectordb`'s work on the command line's side: the workload and overrides from
upstream's flags, then ``datasize`` (printed), ``datagen`` (the index built, its figures
printed) or ``run`` (as ``run`` runs one)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from dliobench.base.errors import ConfigError
from dliobench.base.units import size_text
from dliobench.config.schema import Config
from dliobench.config.vectordb_keys import PRESETS, overrides_from

Loader = Callable[[argparse.Namespace], tuple[Config, list[str]]]


def _workload(args: argparse.Namespace) -> list[str]:
    """The workload (``--config``'s preset, a named one, or ``vectordb``) and overrides."""
    if args.workload[:1] in (["file"], ["object"]):  # upstream's newer shape: a word
        args.vdb_storage = args.workload.pop(0)
    if getattr(args, "vdb_storage", None) == "object":
        raise ConfigError("the diskann engine reads its index with POSIX reads only, so an "
                          "object store (--object) cannot hold it; give --file and an "
                          "--index-dir on the storage under test")
    named = args.workload and "=" not in args.workload[0]
    preset = PRESETS.get(args.vdb_config or "", args.vdb_config)
    head = [] if named else [preset or "vectordb"]
    return [*head, *args.workload, *overrides_from(vars(args))]


def _run(args: argparse.Namespace, load: Loader, asked: Callable[[argparse.Namespace], Any],
         run_set: Callable[[argparse.Namespace, Config, list[str]], int]) -> int:
    """One run as ``run`` runs one, or with ``--loops N`` a run set of N (as ``--repeat``)."""
    from dliobench.results.console import show_run
    from dliobench.run.commands import run_benchmark

    cfg, warnings = load(args)
    if (args.repeat or 1) > 1:
        return run_set(args, cfg, warnings)
    done = run_benchmark(cfg, warnings, asked(args))
    return show_run(done.run_dir, done.result, done.problem, False, False)


def _before_ranks(cfg: Config) -> None:
    """What refuses a run, said once before any rank starts: an engine not built yet, an
    object store, a missing or damaged index, a server that does not answer."""
    from dliobench.run.vectordb.build import refuse_url
    from dliobench.run.vectordb.engines import engine_for
    from dliobench.run.vectordb.manifest import load

    engine = engine_for(cfg.vectordb.engine)
    refuse_url(cfg.vectordb)
    load(cfg.vectordb)
    engine.ready(cfg.vectordb)


def _ranks(args: argparse.Namespace) -> int | None:
    """``--num-query-processes N``: N ranks started here when no launcher did (their exit
    status), else None to go on as this rank of a job of N (one sentence when it is not)."""
    from dliobench.comm.local_launch import start_or_join

    return start_or_join(args.vdb_processes, args.typed_argv, None, "--num-query-processes")


def datasize(cfg: Config) -> int:
    """Print the bytes of the index ``cfg`` names: upstream's estimate and our files."""
    from rich.console import Console

    from dliobench.run.vectordb.manifest import vector_count
    from dliobench.run.vectordb.sizes import (
        Shape,
        engine_files,
        pq_bytes_for,
        raw_bytes,
        upstream_estimate,
    )

    v = cfg.vectordb
    count = vector_count(v)
    files = engine_files(Shape(count, v.dimension, v.max_degree,
                               pq_bytes_for(v.dimension, v.pq_bytes), v.num_query_vectors, v.k))
    out = Console(highlight=False)
    out.print(f"Vectors:        {count:,} x dim={v.dimension} x 4B")
    out.print(f"Raw data:       {raw_bytes(count, v.dimension):,} bytes "
              f"({size_text(raw_bytes(count, v.dimension))})")
    est = upstream_estimate(count, v.dimension, v.index_type, v.num_shards)
    out.print(f"Upstream estimate ({v.index_type.upper()}, {v.num_shards} shard(s)): {est:,} bytes "
              f"({size_text(est)})")
    for name, nbytes in files.items():
        out.print(f"  {name:<14}{nbytes:>20,} bytes")
    total = sum(files.values())
    out.print(f"diskann engine total: {total:,} bytes ({size_text(total)}) in "
              f"{v.index_dir}")
    return 0


def datagen(cfg: Config) -> int:
    """Build the index (unless it is there), print what it took."""
    from rich.console import Console

    from dliobench.run.vectordb.build import datagen as build

    done = build(cfg.vectordb)
    doc = done.doc
    out = Console(highlight=False)
    vec, b = doc["vectors"], doc["build"]
    if not done.built:
        out.print(f"the index in {done.folder} is there ({vec['count']:,} x "
                  f"{vec['dimension']}); runs reuse it, --force rebuilds it")
        return 0
    out.print(f"built {doc['engine']} {doc['index_type'].upper()} of {vec['count']:,} x "
              f"{vec['dimension']} {vec['distribution']} vectors: vectors {b['vectors_s']:.2f} "
              f"s, index {b['index_s']:.2f} s, ground truth {b['truth_s']:.2f} s; "
              f"{b['bytes']:,} bytes in files, {b['device_write_bytes']:,} bytes written "
              "to the device")
    if doc.get("index_type_asked", doc["index_type"]) != doc["index_type"]:
        out.print(f"the server built {doc['index_type'].upper()}, not the "
                  f"{doc['index_type_asked'].upper()} asked: figures are reported under "
                  f"{doc['index_type'].upper()}", soft_wrap=True)
    out.print(f"index: {done.folder}", soft_wrap=True)
    return 0


def command(load: Loader, asked: Callable[[argparse.Namespace], Any],
            run_set: Callable[[argparse.Namespace, Config, list[str]], int]) -> \
        Callable[[argparse.Namespace], int]:
    """`dliobench vectordb VERB`'s function, given the CLI's loader, its options of a command
    that runs on every rank, and its run-set command."""
    def cmd(args: argparse.Namespace) -> int:
        args.workload = _workload(args)
        if args.vdb_verb == "run":
            _before_ranks(load(args)[0])
            ended = _ranks(args)
            return _run(args, load, asked, run_set) if ended is None else ended
        cfg, _ = load(args)
        return datasize(cfg) if args.vdb_verb == "datasize" else datagen(cfg)
    return cmd
