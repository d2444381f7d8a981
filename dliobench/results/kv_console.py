"""The console summary of a KV-cache run: upstream's headline figures, the tiers, the worst
rank's storage read P95 and what limited the run."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dliobench.base.units import size_text
from dliobench.results.figures import text
from dliobench.results.schema import RunResult
from dliobench.results.storage_reads import read_origin


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f} ms"


def _tier_line(tier: dict[str, Any]) -> str:
    lat = tier["read_latency_ms"]
    return (f"read {size_text(tier['read_bytes'])} in {tier['reads']} ops (p50 "
            f"{_ms(lat['p50'])}, p95 {_ms(lat['p95'])}, p99 {_ms(lat['p99'])}); written "
            f"{size_text(tier['write_bytes'])} in {tier['writes']} ops")


def _scaling_line(scaled: dict[str, Any]) -> str:
    """The autoscaler's users over time (the first rank's) and where they ended."""
    steps = " -> ".join(f"stop at {e['t_s']:g} s" if e["action"] == "stop"
                        else f"{e['users']} at {e['t_s']:g} s"
                        for e in scaled["timeline"] if e["action"] != "hold")
    why = f"; stopped: {scaled['stopped']}" if scaled["stopped"] else ""
    return (f"{scaled['mode']} every {scaled['interval_s']:g} s: {scaled['initial_users']} "
            f"users -> {scaled['final_users']} (most {scaled['most_users']}, "
            f"{scaled['total_scale_events']} changes{': ' + steps if steps else ''}){why}")


def print_kvcache_summary(result: RunResult, run_dir: str,
                          console: Console | None = None) -> None:
    """Show the model and load, throughput, latencies per tier, and the verdict."""
    console = console or Console()
    kv: dict[str, Any] = result["kvcache"]
    table = Table(title=f"dliobench {result['workload']} KV cache — run {result['run_id']}",
                  show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    scale = ("" if kv["entry_scale"] == 1
             else f", [yellow]entries scaled by {kv['entry_scale']:g}[/]")
    table.add_row("model", f"{kv['model']} ({size_text(kv['kv_bytes_per_token'])} per token"
                  f"{scale}); {kv['clients']} rank(s) x {kv['num_users']} users, "
                  f"{kv['io_depth']} requests at once")
    stopped = (f"; at the end {kv.get('unfinished_requests', 0)} in flight stopped, "
               f"{kv['dropped_requests']} not started"
               if kv.get("unfinished_requests") or kv["dropped_requests"] else "")
    table.add_row("requests", f"{kv['total_requests']} served of {kv['scheduled_requests']} "
                  f"scheduled in {kv['elapsed_time']:.2f} s "
                  f"({text('kv_requests_per_s', result)}){stopped}")
    stats = kv["cache_stats"]
    table.add_row("throughput", f"{text('kv_tokens_per_s', result)}; decode "
                  f"bytes read {stats['decode_bytes_read_gb']:.3f} GB; hit rate "
                  f"{stats['cache_hit_rate'] if stats['cache_hit_rate'] is not None else 'n/a'}")
    table.add_row("end to end", f"p50 {text('kv_e2e_p50_ms', result)}, p95 "
                  f"{text('kv_e2e_p95_ms', result)}")
    for name, tier in kv["tiers"].items():
        if tier["reads"] or tier["writes"]:
            table.add_row(f"{name} tier", _tier_line(tier))
    scaled = kv.get("autoscaling")
    if scaled:
        table.add_row("autoscaling", _scaling_line(scaled))
    words = read_origin(result).words()
    if words:
        table.add_row("reads from storage", words)
    table.add_row("worst rank", f"storage read p95 {_ms(kv['worst_rank_storage_read_p95_ms'])}")
    table.add_row("limited by", f"{kv['verdict']['limiter']}: {kv['verdict']['reason']}")
    console.print(table)
    console.print(f"results: {run_dir}/result.json", soft_wrap=True, highlight=False)
