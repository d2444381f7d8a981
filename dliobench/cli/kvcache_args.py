"""`dliobench kvcache`'s arguments: mlcommons/storage kv-cache.py's options (the table in
``config.kvcache_keys``), each setting ``kvcache.<key>``, after a workload and overrides."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from dliobench.config.kvcache_keys import UPSTREAM_FLAGS, KVCacheConfig


def add_parser(sub: Any, commands: Mapping[str, Callable[[argparse.Namespace], int]],
               common: tuple[Callable[..., None], Callable[..., None]]) -> None:
    """`dliobench kvcache`; ``common``: the parser's workload and launcher arguments (handed
    in: this module must not import the parser that imports it)."""
    add_workload_args, add_launcher_arg = common
    p = sub.add_parser("kvcache", help="the KV-cache benchmark (LLM inference offloading its "
                       "KV cache to GPU, CPU and storage tiers)",
                       description="Emulate LLM inference offloading its KV cache, with "
                       "mlcommons/storage kv-cache.py's options (docs/kvcache.md); each sets "
                       "the key kvcache.<name> of the workload (workloads/kvcache.yaml, or a "
                       "workloads/kvcache_*.yaml file or name, then KEY=VALUE overrides).")
    add_workload_args(p)
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
    add_launcher_arg(p)
    p.set_defaults(func=commands["kvcache"])
