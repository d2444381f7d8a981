"""The console summary printed at the end of a run."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dliobench.base.units import size_text
from dliobench.config.profiles import profile_name
from dliobench.results.figures import dlio_line, text
from dliobench.results.schema import NodeMetrics, RunResult
from dliobench.results.storage_reads import read_origin
from dliobench.results.verdict import verdict_words

DLIO_TRAINING = ("train_au_mean_percentage", "train_throughput_mean_samples_per_second",
                 "train_io_mean_MB_per_second")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{1e3 * x:,.2f} ms"


def _spread(result: RunResult) -> str:
    """The AU's standard deviation over epochs, as DLIO's summary gives it (its
    ``[METRIC] ... AU (%): mean (stdev)``, a population stdev): empty with one epoch."""
    aus = [a for a in (e.get("au") for e in result.get("epochs") or []) if a is not None]
    if len(aus) < 2:
        return ""
    mean = sum(aus) / len(aus)
    stdev = (sum((a - mean) ** 2 for a in aus) / len(aus)) ** 0.5
    return f" ± {100 * stdev:.1f} over {len(aus)} epochs"


def _decoded_by(cfg: dict[str, Any]) -> str:
    """Which decoder turned the run's images into pixels (reader.decoder), for jpeg and png."""
    r = cfg["reader"]
    if cfg["dataset"]["format"] not in ("jpeg", "png"):
        return ""
    if not r.get("decode", True):
        return " (not decoded: reader.decode false)"
    if r["data_loader"] == "dali" and r.get("dali_native_reader"):
        return " (decoded by DALI's fn.decoders.image)"
    return f" (decoded by {r.get('decoder', 'pil')})"


def print_summary(result: RunResult, run_dir: str, console: Console | None = None) -> None:
    """Show the run's headline numbers, its verdict against the AU floor, where the time
    went, and where the files are (the path on a line of its own, never cut)."""
    console = console or Console()
    if "kvcache" in result:
        from dliobench.results.kv_console import print_kvcache_summary

        print_kvcache_summary(result, run_dir, console)
        return
    if "vectordb" in result:
        from dliobench.results.vdb_console import print_vectordb_summary

        print_vectordb_summary(result, run_dir, console)
        return
    if (result.get("checkpoint") or {}).get("workflow") == "checkpoint-only":
        from dliobench.results.ckpt_console import print_checkpoint_summary

        print_checkpoint_summary(result, run_dir, console)
        return
    m, cfg = result["metrics"], result["config"]
    table = Table(title=f"dliobench {result['workload']} — run {result['run_id']}",
                  show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("ranks × accelerator", f"{result['ranks_count']} × {profile_name(cfg)} "
                  f"({cfg['train']['computation_time']:g} s/batch)")
    table.add_row("loader / format", f"{cfg['reader']['data_loader']} / {cfg['dataset']['format']}"
                  f"{_decoded_by(cfg)}")
    table.add_row("accelerator utilization", f"{text('au', result)}{_spread(result)} (worst "
                  f"rank {text('au_worst_rank', result)}; floor {text('au_floor', result)})")
    verdict = result.get("verdict")
    if verdict:
        colour = {True: "green", False: "red"}.get(verdict["meets_floor"], "yellow")
        table.add_row("verdict", f"[{colour}]{verdict_words(verdict)}[/]: {verdict['reason']}")
    shares = result.get("time_shares")
    if shares:
        table.add_row("where the time went", ", ".join(
            f"{name} {text(f'time_{name}', result)}" for name in shares))
    table.add_row("throughput", f"{text('samples_per_s', result)}, "
                  f"{text('read_MB_per_s', result)} ({text('read_MiB_per_s', result)})")
    dlio = dlio_line(result, DLIO_TRAINING)
    if dlio:
        table.add_row("DLIO's summary.json", f"{dlio} (DLIO's formulas: per-epoch means, "
                      "nominal record size, MiB)")
    table.add_row("wait per step", f"p50 {text('wait_p50_ms', result)}, p90 "
                  f"{text('wait_p90_ms', result)}, p99 {text('wait_p99_ms', result)}, max "
                  f"{text('wait_max_ms', result)}")
    requests = m.get("requests")
    if requests:
        table.add_row("S3 GETs", f"{requests['requests']:,}; first byte p50 "
                      f"{_ms(requests['first_byte_p50_s'])}, p99 "
                      f"{_ms(requests['first_byte_p99_s'])}, max "
                      f"{_ms(requests['first_byte_max_s'])}; whole GET p50 "
                      f"{_ms(requests['total_p50_s'])}, p99 {_ms(requests['total_p99_s'])}, "
                      f"max {_ms(requests['total_max_s'])}")
    table.add_row("counted", f"{m['steps']} steps, {m['samples']} samples, "
                  f"{m['bytes'] / 1e6:,.1f} MB read; first step {_ms(m['first_step_s'])}")
    device = _device_reads(result)
    if device:
        wire = str(result["honesty"].get("device_read_counter", "")).startswith("the wire")
        table.add_row("read over the wire" if wire else "read from the device", device)
    words = read_origin(result).words()
    if words:
        table.add_row("reads from storage", words)
    left = m["undelivered_samples"]
    once = {True: "yes", False: "[red]NO[/red]", None: "[yellow]unknown (interrupted)[/]"}[
        m["exactly_once"]]
    table.add_row("every sample exactly once", once + (
        f"; {left} samples left out by design (drop_last, steps evened across ranks, "
        "total_training_steps)" if left else ""))
    for label, part in _phases(result):
        table.add_row(label, part)
    console.print(table)
    _print_nodes(result, console)
    console.print(f"results: {run_dir}/result.json and timeline.csv", soft_wrap=True,
                  highlight=False)
    _print_notes(result, console)


def _print_nodes(result: RunResult, console: Console) -> None:
    """The per-node table of a run on more than one node, and its straggler node(s)."""
    nodes = result.get("nodes") or []
    if len(nodes) < 2:
        return
    table = Table(title="per node", title_justify="left")
    wired = any("verdict" in n for n in nodes)  # network storage: the wire and each limit
    for name in ("node", "ranks", "AU", "samples/s", "MB read", "wait", "CPU", "staging",
                 *(("link", "limit") if wired else ())):
        table.add_column(name, justify="left" if name in ("node", "limit") else "right")
    for n in nodes:
        staging = n.get("staging_s")
        table.add_row(n["host"], str(len(n["ranks"])), _pct(n["au"]),
                      f"{n['samples_per_s']:,.1f}", f"{n.get('bytes', 0) / 1e6:,.1f}",
                      _pct(n.get("wait_share")), _pct(n.get("cpu_share")),
                      "-" if staging is None else f"{staging:.2f} s",
                      *((_pct(n.get("link_use")), _node_limit(n)) if wired else ()))
    console.print(table)
    if wired:
        counters = sorted({n["wire_counter"] for n in nodes if n.get("wire_counter")})
        console.print(f"link: the share of its rate the wire carried ({'; '.join(counters)}); "
                      "limit: nodes[].verdict in result.json says why", soft_wrap=True,
                      highlight=False)
    slow = result["metrics"].get("straggler_nodes") or []
    if slow:
        console.print(f"[yellow]straggler node{'s' if len(slow) > 1 else ''}:[/] "
                      f"{', '.join(slow)} (samples/s per rank below 90 % of the median node's)")


def _node_limit(node: NodeMetrics) -> str:
    verdict = node.get("verdict")
    return verdict["limit"] if verdict else "-"


def _phases(result: RunResult) -> list[tuple[str, str]]:
    """Generation, staging and checkpoint figures, when they ran."""
    out = []
    gen = result.get("generation")
    if gen:
        out.append(("generation", f"{gen['files']} files, {size_text(gen['bytes'])} in "
                    f"{gen['seconds']:.1f} s, {text('generation_GB_per_s', result)}"))
    stage = result.get("staging")
    if stage:
        out.append(("staging", f"{stage['files']} files, {size_text(stage['bytes'])} in "
                    f"{stage['seconds']:.1f} s, {text('staging_GB_per_s', result)}"))
    ckpt = result.get("checkpoint")
    if ckpt:
        out.append(("checkpoints", f"{ckpt['count']} x {size_text(ckpt['bytes'] / ckpt['count'])}; "
                    f"write {text('ckpt_write_GB_per_s', result)}, read "
                    f"{text('ckpt_read_GB_per_s', result)}"))
    return out


def _device_reads(result: RunResult) -> str | None:
    """How much of the counted bytes came from the storage device (None: not measured)."""
    honesty = result["honesty"]
    counter = honesty.get("device_read_counter")
    if not counter:
        return None
    nbytes, share = honesty.get("device_read_bytes"), honesty.get("device_read_share")
    if nbytes is None:
        return f"[yellow]{counter}[/]"
    of = "" if share is None else f" ({text('device_read_share', result)} of the bytes delivered)"
    return f"{nbytes / 1e6:,.1f} MB up to the end of the counted windows{of}; {counter}"


def _print_notes(result: RunResult, console: Console) -> None:
    """What the reader must know to trust the figures: no counted step, deviations from the
    plan, a short window, reads that may have come from memory."""
    m = result["metrics"]
    if m["steps"] == 0:
        console.print("[yellow]no step was counted: each epoch has no more steps than "
                      "metric.exclude_start_steps + exclude_end_steps; add files or epochs[/]")
    for deviation in result.get("deviations", []):
        console.print(f"[yellow]deviation:[/] {deviation}")
    honesty = result["honesty"]
    if honesty["window_too_short"]:
        console.print(
            f"[yellow]note:[/] an epoch counted only {m['min_counted_steps']} step(s) "
            "while the loader reads batches ahead: up to "
            f"{honesty['readahead_share'] or 0:.0%} of the counted batches "
            "may have been read before the window opened, inflating AU, samples/s and "
            "bytes/s. Add files (dataset.num_files_train) or lower "
            "metric.exclude_start_steps."
        )
    origin = honesty.get("data_origin", "")
    if origin and not origin.startswith("synthetic"):
        console.print(f"[yellow]note:[/] the data read: {origin}")
    if (result.get("storage") or {}).get("fs_type") == "s3":
        console.print(
            "[yellow]note:[/] an object store: this host's page cache does not apply, but the "
            "server may keep objects in its memory; a dataset larger than the server's memory "
            "measures its storage rather than its cache.")
    reads = read_origin(result)  # the measured share decides where there is one
    share = reads.share
    if share is not None and reads.page_cache_possible:
        rest = "the reads came" if reads.state == "page cache" else "the rest came"
        console.print(
            f"[yellow]note:[/] only {text('device_read_share', result)} of the bytes read "
            f"came from the storage device: {rest} from this host's memory (page cache or a "
            "memory file system), so the rates are not storage's. Use reader.odirect=true, "
            "storage.drop_cache=true or a larger dataset (`dliobench datasize`) to measure "
            "storage.")
    elif share is None and reads.page_cache_possible:
        console.print(
            f"[yellow]note:[/] the dataset ({honesty['dataset_bytes'] / 1e9:.2f} GB) is smaller "
            f"than 5 x the hosts' memory (5 x {honesty['host_memory_bytes'] / 1e9:.1f} GB = "
            f"{5 * honesty['host_memory_bytes'] / 1e9:.1f} GB), O_DIRECT is "
            "off and the cache was not dropped: reads may have come from RAM, not storage. "
            "Use reader.odirect=true, storage.drop_cache=true or a larger dataset "
            "(`dliobench datasize`) to measure storage."
        )
