"""The console summary printed at the end of a run."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from dliobench.results.schema import RunResult


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _rate(x: float | None, unit: str) -> str:
    return "n/a" if x is None else f"{x:,.1f} {unit}"


def _bytes_rate(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x / 1e6:,.1f} MB/s ({x / 2**20:,.1f} MiB/s)"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{1e3 * x:,.2f} ms"


def print_summary(result: RunResult, run_dir: str, console: Console | None = None) -> None:
    """Show the run's headline numbers, its verdict against the AU floor, and where files are."""
    console = console or Console()
    m, cfg = result["metrics"], result["config"]
    floor = cfg["metric"]["au"]
    table = Table(title=f"dliobench {result['workload']} — run {result['run_id']}",
                  show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    accel = cfg["train"]["accelerator"] or "custom"
    table.add_row("ranks × accelerator", f"{result['ranks_count']} × {accel} "
                  f"({cfg['train']['computation_time']:g} s/batch)")
    table.add_row("loader / format", f"{cfg['reader']['data_loader']} / {cfg['dataset']['format']}")
    verdict = ""
    if m["au"] is not None:
        verdict = " [green]meets[/green]" if m["au"] >= floor else " [red]below[/red]"
    table.add_row("accelerator utilization", f"{_pct(m['au'])} (worst rank {_pct(m['au_min'])};"
                  f" floor {_pct(floor)}){verdict}")
    table.add_row("throughput", f"{_rate(m['samples_per_s'], 'samples/s')}, "
                  f"{_bytes_rate(m['bytes_per_s'])}")
    table.add_row("wait per step", f"p50 {_ms(m['wait_p50_s'])}, p90 {_ms(m['wait_p90_s'])}, "
                  f"p99 {_ms(m['wait_p99_s'])}, max {_ms(m['wait_max_s'])}")
    table.add_row("counted", f"{m['steps']} steps, {m['samples']} samples, "
                  f"{m['bytes'] / 1e6:,.1f} MB read; first step {_ms(m['first_step_s'])}")
    once = "yes" if m["exactly_once"] else "[red]NO[/red]"
    table.add_row("every sample exactly once", f"{once} ({m['undelivered_samples']} left out "
                  "by drop_last, even steps across ranks or total_training_steps)")
    table.add_row("results", f"{run_dir}/result.json, timeline.csv")
    console.print(table)
    _print_notes(result, console)


def _print_notes(result: RunResult, console: Console) -> None:
    """What the reader must know to trust the figures: no counted step, deviations from the
    plan, a short window, reads that may have come from memory."""
    m, cfg = result["metrics"], result["config"]
    if m["steps"] == 0:
        console.print("[yellow]no step was counted: each epoch has no more steps than "
                      "metric.exclude_start_steps + exclude_end_steps; add files or epochs[/]")
    for deviation in result.get("deviations", []):
        console.print(f"[yellow]deviation:[/] {deviation}")
    honesty = result["honesty"]
    if honesty["window_too_short"]:
        console.print(
            f"[yellow]note:[/] an epoch counted only {m['min_counted_steps']} step(s) "
            f"while the loader reads up to {cfg['reader']['prefetch_size']} "
            f"batch(es) ahead: up to {honesty['readahead_share'] or 0:.0%} of the counted batches "
            "may have been read before the window opened, inflating samples/s and bytes/s. "
            "Add files (dataset.num_files_train) or lower metric.exclude_start_steps."
        )
    if honesty["page_cache_possible"]:
        console.print(
            f"[yellow]note:[/] the dataset ({honesty['dataset_bytes'] / 1e9:.2f} GB) is under "
            f"5x this host's memory ({honesty['host_memory_bytes'] / 1e9:.1f} GB), O_DIRECT is "
            "off and the cache was not dropped: reads may have come from RAM, not storage. "
            "Use reader.odirect=true, storage.drop_cache=true or a larger dataset "
            "(`dliobench datasize`) to measure storage."
        )
