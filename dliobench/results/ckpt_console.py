"""The console summary of a checkpoint-only run."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dliobench.base.units import size_text
from dliobench.results.figures import text
from dliobench.results.schema import RunResult
from dliobench.results.storage_reads import read_origin


def _op_line(result: RunResult, name: str, op: dict[str, Any]) -> str:
    """One line per direction: MLPerf's figures first, then ours, then DLIO's (GiB/s)."""
    dlio = {"write": "save", "read": "load"}[name]
    return (f"{op['count']} x {size_text(op['bytes_per_checkpoint'])}: duration (slowest rank) "
            f"{text(f'ckpt_{name}_duration_s', result)}, throughput (slowest rank) "
            f"{text(f'ckpt_{name}_slowest_rank_GB_per_s', result)}; aggregate "
            f"{text(f'ckpt_{name}_aggregate_GB_per_s', result)}"
            f" (p50 {text(f'ckpt_{name}_aggregate_p50_GB_per_s', result)}, p99 "
            f"{text(f'ckpt_{name}_aggregate_p99_GB_per_s', result)}); rank time p50 "
            f"{op['rank_s_p50']:.3f} s,"
            f" p99 {op['rank_s_p99']:.3f} s; DLIO's summary.json "
            f"{dlio}_checkpoint_io_mean_GB_per_second "
            f"{text(f'{dlio}_checkpoint_io_mean_GB_per_second', result)} (DLIO's \"GB\" is GiB)")


def layout_line(layout: dict[str, Any]) -> str:
    """TP x PP x DP, ZeRO, the whole checkpoint, and what this run wrote of it."""
    text = (f"TP {layout['tensor_parallelism']} x PP {layout['pipeline_parallelism']} x DP "
            f"{layout['data_parallelism']} = {layout['layout_ranks']} ranks on "
            f"{layout['launched_ranks']} launched, ZeRO {layout['zero_stage']}; checkpoint "
            f"{size_text(layout['checkpoint_bytes'])} ({layout['checkpoint_bytes'] / 2**30:,.1f}"
            f" GiB)")
    if layout["mode"] == "subset":
        text += (f"; subset: {layout['share_of_checkpoint']:.2%} of it (the rules' "
                 f"{layout['rules_share']:.2%})")
    if layout["scale"] != 1.0:
        text += (f"; [yellow]scaled by {layout['scale']:g}[/]: "
                 f"{size_text(layout['planned_bytes'])} written per checkpoint")
    return text


def print_checkpoint_summary(result: RunResult, run_dir: str,
                             console: Console | None = None) -> None:
    """Show the layout, the write and read figures, and whether the reads were honest."""
    console = console or Console()
    ckpt = result["checkpoint"]
    table = Table(title=f"dliobench {result['workload']} checkpoints — run {result['run_id']}",
                  show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("layout", layout_line(ckpt["layout"]))
    table.add_row("files", f"{ckpt['files_per_checkpoint']} per checkpoint, "
                  f"{ckpt['file_format']} format, fsync {'on' if ckpt['fsync'] else 'off'}")
    for op in ("write", "read"):
        if ckpt.get(op):
            table.add_row(op, _op_line(result, op, ckpt[op]))
    if ckpt.get("read"):
        origin = read_origin(result)
        words = origin.words()
        table.add_row("reads from storage", words if origin.state == "storage" else
                      f"[red]{words}[/]")
    console.print(table)
    console.print(f"results: {run_dir}/result.json", soft_wrap=True, highlight=False)
    for warning in result.get("warnings", []):
        if "page cache" in warning:
            console.print(f"[yellow]warning:[/] {warning}")
