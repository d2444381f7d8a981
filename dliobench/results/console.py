"""What the commands that run on every rank print when their work is done (rank 0 only: the
others get nothing to show), and the exit status a run's verdict asks for.

The work itself is in ``run.commands``; the run's summary table is ``results.summary``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dliobench.base.units import size_text

if TYPE_CHECKING:
    from dliobench.comm.world import World
    from dliobench.config.schema import Config, DatasetConfig
    from dliobench.dataset.generate import Generated
    from dliobench.formats.decode_rates import DecodeRate
    from dliobench.results.schema import RunResult

    # dliobench ceiling on rank 0: the world, samples/s per rank, the cache file, and each
    # JPEG decoder's rate when the workload decodes JPEG (else empty)
    Ceiling = tuple[World, float, Path, list[DecodeRate]]

BELOW_FLOOR_EXIT = 3  # run --fail-below-floor: the run completed but missed its AU floor


def say(sentence: str) -> None:
    """A line for the user on stdout, at once (before a run's progress bars)."""
    print(sentence, flush=True)


def show_run(run_dir: Path | None, result: RunResult | None, problem: str | None,
             trace: bool, fail_below_floor: bool) -> int:
    """The run's summary (and metadata table, and trace file when asked); the exit status:
    1 when its files could not go where asked, ``BELOW_FLOOR_EXIT`` when it missed its AU
    floor and that should fail, else 0."""
    if result is None or run_dir is None:
        return 0
    from dliobench.results.summary import print_summary

    print_summary(result, str(run_dir))
    if "metadata" in result:
        from dliobench.results.metadata import table

        print(table(result["metadata"]))
    if trace:
        from dliobench.results.trace import write_trace

        print(f"trace: {write_trace(run_dir)} (open in https://ui.perfetto.dev)")
    if problem:
        print(f"dliobench: error: {problem}", file=sys.stderr)
        return 1
    verdict = result.get("verdict") or {}
    return BELOW_FLOOR_EXIT if verdict.get("meets_floor") is False and fail_below_floor else 0


def show_generation(dataset: DatasetConfig, done: Generated | None) -> None:
    """What a generation wrote, at what rate, against the file size asked for."""
    if done is None:
        return
    if not done.files_written:
        print(f"all {done.files_total} files are already in {dataset.data_folder}")
        return
    rate = done.bytes_written / done.seconds if done.seconds else 0.0
    asked = dataset.record_length_bytes * dataset.num_samples_per_file
    print(f"wrote {done.files_written} of {done.files_total} files, "
          f"{size_text(done.bytes_written)} in {done.seconds:.1f} s ({size_text(rate)}/s) "
          f"to {dataset.data_folder}; mean file "
          f"{done.bytes_written / done.files_written:,.0f} bytes ({asked:,} requested)")


def show_ceiling(config: Config, measured: Ceiling | None) -> None:
    """The client ceiling per rank, the settings it holds for, where it is cached, whether
    the workload's demand per rank is within it, and the decoders' table (jpeg)."""
    if measured is None:
        return
    world, value, cache, rates = measured
    r, d = config.reader, config.dataset
    rate = value * d.record_length_bytes / 1e6
    print(f"client ceiling of {world.host} for {config.name}: {value:,.1f} samples/s per rank "
          f"(about {rate:,.1f} MB/s per rank) with {d.format}, the {r.data_loader} loader, "
          f"{r.read_threads} read threads, batch {r.batch_size}, {world.local_size} "
          f"rank(s) per node; cached in {cache}")
    compute = config.train.computation_time
    demand = r.batch_size / compute if compute else 0
    if demand:
        verdict = "can" if demand <= value else "cannot"
        print(f"  each rank demands {demand:,.1f} samples/s at {compute:g} s per batch: this "
              f"client {verdict} keep up, whatever the storage")
    if rates:
        from dliobench.formats.decode_rates import load_average
        from dliobench.results.decode_table import decode_table

        print("\n".join(decode_table(config, rates, load_average())))


def show_metadata(where: Path | None) -> None:
    """Where the metadata rates were written (their table was said as they came)."""
    if where is not None:
        print(f"result: {where}")


def show_recovered(where: Path, result: RunResult) -> None:
    """Where a recovered result is, its status, and where each rank's records end."""
    kv = result.get("kvcache")  # a KV-cache rank serves requests, not steps
    served = {r["rank"]: r["requests"] for r in kv["ranks"]} if kv else {}
    ended = "; ".join(f"rank {r['rank']}: {served.get(r['rank'], 0)} requests, {r['ended']}"
                      if kv else f"rank {r['rank']}: {r['steps']} steps, {r['ended']}"
                      for r in result.get("ranks_ended", []))
    print(f"result: {where} (status: {result['status']}; {ended})")
