"""`dliobench vectordb datasize|datagen|run`: mlcommons/storage's vectordb verbs and flag names
(``mlpstorage_py/cli/vectordb_args.py``@041cfcf3), each flag setting ``vectordb.<key>`` (the
table in ``config.vectordb_keys``) after a workload (upstream's ``--config default|10m``
names one) and overrides."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from dliobench.config.vectordb_keys import PRESETS, UPSTREAM_FLAGS, VectorDBConfig

# which of upstream's flags each verb takes (vectordb_args.py@041cfcf3), ours on every verb
DATAGEN = {"--host", "--port", "--collection", "--dimension", "--num-shards", "--vector-dtype",
           "--num-vectors", "--distribution", "--force", "--index-type"}
VERB_FLAGS = {
    "datasize": {"--dimension", "--num-vectors", "--index-type", "--num-shards",
                 "--vector-dtype"},
    "datagen": DATAGEN | {"--num-query-vectors", "--search-limit"},
    # ours beyond upstream's run flags: the vectors' flags name the index as datagen did
    "run": DATAGEN - {"--force"} | {"--report-count", "--runtime", "--queries", "--search-ef",
                                    "--search-limit", "--num-query-vectors"},
}
SHORT = {"--host": ("-s",), "--port": ("-p",)}  # upstream's short forms (vectordb_args.py)
OURS = {"--engine", "--index-dir", "--vectors-file", "--min-recall", "--query-threads",
        "--scale", "--queries-file", "--truth-file"}
HELPS = {
    "datasize": "bytes a vector index takes (upstream's estimate and the diskann engine's files)",
    "datagen": "build the vectors, the index and its exact ground truth (once: runs reuse it)",
    "run": "query the index for a runtime or a query count: QPS, latency, recall@k",
}


def _add_verb(sub: Any, verb: str, command: Callable[[argparse.Namespace], int]) -> None:
    p = sub.add_parser(verb, help=HELPS[verb], description=HELPS[verb] + " (docs/vectordb.md)")
    p.add_argument("workload", nargs="*", metavar="[WORKLOAD] [KEY=VALUE ...]",
                   help="workload YAML file or name (default: vectordb), then overrides "
                   "such as vectordb.clusters=32")
    p.add_argument("--config", dest="vdb_config", metavar="NAME",
                   help=f"upstream's config name ({', '.join(PRESETS)}), or a workload")
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(VectorDBConfig)}
    for flag, name, kind in UPSTREAM_FLAGS:
        if flag not in VERB_FLAGS[verb] | OURS:
            continue
        text = f"{helps[name]} (vectordb.{name})".replace("%", "%%")
        if kind == "flag":
            p.add_argument(flag, dest=f"vdb_{name}", action="store_true", help=text)
        else:
            p.add_argument(flag, *SHORT.get(flag, ()), dest=f"vdb_{name}",
                           metavar="N" if kind != "str" else "TEXT", help=text)
    if verb == "datagen":  # upstream's insert batching: the milvus engine's
        p.add_argument("--batch-size", dest="vdb_insert_batch", type=int, metavar="N",
                       help="vectors per insert call (vectordb.insert_batch; the milvus "
                       "engine's, diskann: unused)")
        p.add_argument("--chunk-size", dest="vdb_chunk", type=int, metavar="N",
                       help="vectors read into memory at a time while loading "
                       "(vectordb.chunk_size; the milvus engine's, diskann: unused)")
    if verb == "run":
        p.add_argument("--num-query-processes", dest="vdb_processes", type=int, metavar="N",
                       help="query processes: N ranks, started here under the mpi extra's "
                       "mpiexec when no launcher did (each rank runs --query-threads clients)")
        p.add_argument("--batch-size", dest="vdb_batch_size", type=int, metavar="N",
                       help="queries per search call (vectordb.batch_size)")
        p.add_argument("--benchmark-mode", "--mode", dest="vdb_mode",
                       choices=("timed", "query_count", "sweep"), help="timed, query_count "
                       "or sweep (vectordb.mode; a sweep's grid: vectordb.sweep_threads x "
                       "vectordb.sweep_search_list)")
        p.set_defaults(run_set=False, trace=False, fail_below_floor=False)  # a set's, as run's
        p.add_argument("--loops", dest="repeat", type=int, metavar="N",
                       help="N runs on the index as one run set (upstream's --loops; the "
                       "rules score 5)")
        p.add_argument("--launcher", choices=("auto", "mpi", "torch", "none"), default="auto",
                       help="what started the ranks (default auto, as `run`)")
    if verb != "datasize":
        p.add_argument("--results-dir", dest="vdb_results_dir", metavar="DIR",
                       help="root folder of results (output.folder)")
        # upstream's storage type (common_args.py@dfe7b1f add_storage_type_arguments), as a
        # flag or, in the newer shape, the word after the verb
        p.add_argument("--file", dest="vdb_storage", action="store_const", const="file",
                       help="the index on a file system (the diskann engine's only kind)")
        p.add_argument("--object", dest="vdb_storage", action="store_const", const="object",
                       help="an object store: refused (DiskANN reads its index with POSIX)")
    p.set_defaults(func=command, vdb_verb=verb)


def add_parser(sub: Any, commands: Mapping[str, Callable[[argparse.Namespace], int]]) -> None:
    """`dliobench vectordb` and its three verbs."""
    p = sub.add_parser("vectordb", help="the vector-database benchmark (an ANN index on the "
                       "storage under test: QPS, latency, recall)",
                       description="MLPerf Storage v3.0's vector-database benchmark with "
                       "upstream's verbs and flags, on an embedded DiskANN index "
                       "(docs/vectordb.md).")
    verbs = p.add_subparsers(dest="vdb_verb", metavar="VERB", required=True)
    for verb in ("datasize", "datagen", "run"):
        _add_verb(verbs, verb, commands["vectordb"])
