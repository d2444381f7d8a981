"""`dliobench vectordb`'s work on the command line's side: the workload and overrides from
upstream's flags, then ``datasize`` (printed), ``datagen`` (the index built, its figures
printed) or ``run`` (as ``run`` runs one)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from rich.console import Console

from dliobench.base.units import size_text
from dliobench.config.schema import Config
from dliobench.config.vectordb_keys import PRESETS, overrides_from

log = logging.getLogger("dliobench")
Loader = Callable[[argparse.Namespace], tuple[Config, list[str]]]


def _workload(args: argparse.Namespace) -> list[str]:
    """The workload (``--config``'s preset, a named one, or ``vectordb``) and overrides."""
    named = args.workload and "=" not in args.workload[0]
    preset = PRESETS.get(args.vdb_config or "", args.vdb_config)
    head = [] if named else [preset or "vectordb"]
    values = vars(args)
    ranks = _launched()
    processes = values.get("vdb_processes")
    if processes and processes > ranks and "vdb_query_threads" in values \
            and not values.get("vdb_query_threads"):
        values["vdb_query_threads"] = -(-processes // ranks)
        log.info("--num-query-processes %s with %s rank(s): %s query client thread(s) per "
                 "rank (under `mpiexec -n %s` each process is a rank)", processes, ranks,
                 values["vdb_query_threads"], processes)
    return [*head, *args.workload, *overrides_from(values)]


def _launched() -> int:
    from dliobench.cli.mlpstorage import launched_ranks

    return launched_ranks()


def datasize(cfg: Config) -> int:
    """Print the bytes of the index ``cfg`` names: upstream's estimate and our files."""
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
    out.print(f"index: {done.folder}", soft_wrap=True)
    return 0


def command(load: Loader, run: Callable[[argparse.Namespace], int]) -> \
        Callable[[argparse.Namespace], int]:
    """`dliobench vectordb VERB`'s function, given the CLI's loader and its run command."""
    def cmd(args: argparse.Namespace) -> int:
        args.workload = _workload(args)
        if args.vdb_verb == "run":
            return run(args)
        cfg, _ = load(args)
        return datasize(cfg) if args.vdb_verb == "datasize" else datagen(cfg)
    return cmd
