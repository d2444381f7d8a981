"""The JPEG decoders' table ``dliobench ceiling`` prints for a jpeg workload: images each
decoder turns into pixels per CPU-second of one core on this host now, and so the client
cores one accelerator of the workload's profile needs for decoding alone
(batch size / computation_time images/s; RetinaNet on a B200: 24 / 0.04755 s = 505).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dliobench.base.units import size_text

if TYPE_CHECKING:
    from dliobench.config.schema import Config
    from dliobench.formats.decode_rates import DecodeRate


def decode_table(config: Config, rates: list[DecodeRate], load: float | None = None) -> list[str]:
    """Lines: a heading naming the demand and the host's load, then a row per decoder
    (the configured one marked), a missing library's install sentence in its row."""
    r, d, t = config.reader, config.dataset, config.train
    demand = r.batch_size / t.computation_time if t.computation_time else 0.0
    who = t.accelerator or "the emulated accelerator"
    lines = [f"JPEG decode on one core of this host now ({size_text(d.record_length_bytes)} "
             f"files as generated{_load_words(load)}); one {who} demands {demand:,.1f} "
             f"images/s ({r.batch_size} per {t.computation_time:g} s):"]
    lines.append(f"  {'decoder':<12} {'images/s per core':>18} {'cores per ' + who:>20}")
    for rate in rates:
        mark = " (reader.decoder)" if rate.decoder == r.decoder else ""
        if rate.missing:
            lines.append(f"  {rate.decoder:<12} not measured: {rate.missing}")
            continue
        cores = rate.cores_for(demand)
        lines.append(f"  {rate.decoder:<12} {rate.per_cpu_s:>18,.0f} "
                     f"{'-' if cores is None else f'{cores:.2f}':>20}{mark}")
    return lines


def _load_words(load: float | None) -> str:
    return "" if load is None else f", load average {load:.1f}"
