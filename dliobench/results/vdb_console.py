"""The console summary of a vector-database run: the index, QPS, latency percentiles,
recall@k against the floor (an invalid run said in red), reads per query three ways, and
what limited the queries. The same figures as the result's ``vectordb`` section."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dliobench.base.units import size_text
from dliobench.results.figures import text
from dliobench.results.schema import RunResult
from dliobench.results.vdb_server import server_of


def _num(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:,.2f}{unit}"


def reads_line(reads: dict[str, Any]) -> str:
    """Reads per query: the index's own count, the device's, and the device bytes."""
    nbytes = reads.get("device_bytes")
    return (f"index {_num(reads.get('index'))}, device {_num(reads.get('device'))}, "
            f"{'n/a' if nbytes is None else size_text(int(nbytes))} from the device "
            f"({reads.get('device_counter') or 'uncounted'})")


def print_vectordb_summary(result: RunResult, run_dir: str,
                           console: Console | None = None) -> None:
    """Show the index and load, QPS, latencies, recall, reads per query and the verdict."""
    console = console or Console()
    v: dict[str, Any] = result["vectordb"]
    index = v.get("index", {})
    vec = index.get("vectors", {})
    table = Table(title=f"dliobench {result['workload']} vector database — run "
                  f"{result['run_id']}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    mix = (f", {vec.get('clusters')} clusters, spread {vec.get('spread')}"
           if vec.get("distribution") == "clustered" else "")
    kind = str(v.get("index_type")).upper()
    table.add_row("index", f"{v.get('engine')} {kind}: {vec.get('count', 0):,} "
                  f"x {vec.get('dimension')} {vec.get('distribution')}{mix}, "
                  f"{size_text(int(index.get('bytes', 0)))}")
    server = server_of(v)
    if server:
        table.add_row("server", f"{server.get('server')} ({server.get('server_version')}), "
                      f"collection {server.get('collection')}: built "
                      f"{str(server.get('built_index_type')).upper()} (asked "
                      f"{str(server.get('index_type_asked')).upper()})")
    table.add_row("load", f"{v.get('clients')} client(s) ({v.get('ranks')} rank(s) x "
                  f"{v.get('query_threads')} thread(s)), batch {v.get('batch_size')}, "
                  f"search list {v.get('search_list')}"
                  + ("" if server else f", beam width {v.get('beam_width')}"))
    table.add_row("throughput", f"{text('vdb_qps', result)} ({v['queries']:,} in "
                  f"{v['window_s']:.2f} s)")
    table.add_row("latency", ", ".join(f"{p} {text(f'vdb_{p}_ms', result)}"
                                       for p in ("p50", "p95", "p99", "p999")))
    style = "green" if v["valid"] else "red"
    table.add_row(f"recall@{v['k']}", f"[{style}]{text('vdb_recall', result).strip()}[/] (floor "
                  f"{v['min_recall']})" + ("" if v["valid"] else
                                           f" [red]INVALID: {v['invalid_reason']}[/]"))
    table.add_row("reads/query", reads_line(v["reads_per_query"]))
    table.add_row("limited by", f"{v['verdict']['limiter']}: {v['verdict']['reason']}")
    console.print(table)
    console.print(f"results: {run_dir}/result.json", soft_wrap=True, highlight=False)
