"""`dliobench kvcache`'s arguments: mlcommons/storage kv-cache.py's options (the table in
``config.kvcache_keys``), each setting ``kvcache.<key>``, after a workload and overrides."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import dliobench.cli.mlpstorage_kvcache as mlpstorage_kvcache
from dliobench.config.kvcache_keys import UPSTREAM_FLAGS, KVCacheConfig


def add_parser(sub: Any, commands: Mapping[str, Callable[[argparse.Namespace], int]]) -> None:
    """`dliobench kvcache` (its own arguments: a workload and overrides, upstream's options,
    the launcher; this module does not import the parser that calls it)."""
    p = sub.add_parser("kvcache", help="the KV-cache benchmark (LLM inference offloading its "
                       "KV cache to GPU, CPU and storage tiers)",
                       description="Emulate LLM inference offloading its KV cache, with "
                       "mlcommons/storage kv-cache.py's options (docs/kvcache.md); each sets "
                       "the key kvcache.<name> of the workload (workloads/kvcache.yaml, or a "
                       "workloads/kvcache_*.yaml file or name, then KEY=VALUE overrides).")
    p.add_argument("workload", nargs="*", metavar="[WORKLOAD] [KEY=VALUE ...]",
                   help="workload YAML file or name in workloads/ (default: kvcache), then "
                   "overrides such as kvcache.io_depth=32 (`dliobench keys` lists them)")
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(KVCacheConfig)}
    for flag, name, kind in UPSTREAM_FLAGS:
        text = f"{helps[name]} (kvcache.{name})".replace("%", "%%")
        if kind == "flag":
            p.add_argument(flag, dest=f"kv_{name}", action="store_true", help=text)
        else:
            p.add_argument(flag, dest=f"kv_{name}", metavar="N" if kind != "str" else "TEXT",
                           help=text)
    p.add_argument("--output", dest="kv_output", metavar="DIR|FILE.json",
                   help="root folder of results (output.folder); a name ending in .json is "
                   "upstream's --output: the figures also go there (kvcache.output_json)")
    p.add_argument("--launcher", choices=("auto", "mpi", "torch", "none"), default="auto",
                   help="what started the ranks (default auto, as `run`)")
    mlpstorage_kvcache.add_args(p)  # mlpstorage kvcache run|datasize|validate
    p.set_defaults(func=commands["kvcache"])
