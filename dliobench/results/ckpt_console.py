"""The console summary of a checkpoint-only run."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dliobench.base.units import size_text
from dliobench.results.schema import RunResult
from dliobench.results.storage_reads import made_storage_reads_by


def _gbps(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e9:,.3f} GB/s"


def _op_line(op: dict[str, Any]) -> str:
    """One line per direction: MLPerf's figures first, then ours."""
    return (f"{op['count']} x {size_text(op['bytes_per_checkpoint'])}: duration (slowest rank) "
            f"{op['duration_s_mean']:.3f} s, throughput (slowest rank) "
            f"{_gbps(op['throughput_bytes_per_s_mean'])}; aggregate "
            f"{_gbps(op['aggregate_bytes_per_s'])}"
            f" (p50 {_gbps(op['aggregate_bytes_per_s_p50'])}, p99 "
            f"{_gbps(op['aggregate_bytes_per_s_p99'])}); rank time p50 {op['rank_s_p50']:.3f} s,"
            f" p99 {op['rank_s_p99']:.3f} s")


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
            table.add_row(op, _op_line(ckpt[op]))
    if ckpt.get("read"):
        how = made_storage_reads_by(result)
        table.add_row("reads from storage", f"yes ({how})" if how else
                      "[red]NOT ensured[/]: may have come from the page cache")
    console.print(table)
    console.print(f"results: {run_dir}/result.json", soft_wrap=True, highlight=False)
    for warning in result.get("warnings", []):
        if "page cache" in warning:
            console.print(f"[yellow]warning:[/] {warning}")
