"""The table of figures: every rate and share a run's outputs print, each computed once.

A ``Figure`` names the one function of ``result.json`` that computes it, the unit it is
printed in, and every output that carries it (the console summary, ``result.json``,
``summary.json``, ``runs.csv``), with the factor between the printed unit and what that
output stores. The console renders its rows with ``Figure.text``; ``runs.csv`` and
``summary.json`` hold the same computation's value. ``docs/results.md``, "The table of
figures", is ``markdown()``'s output, and ``tests/integration/test_consistency.py`` walks this
table over a matrix of runs: a figure must show the same value (within its printed rounding)
in every output that names it, and a rate or share the console prints that no figure
accounts for fails that test.

DLIO's ``summary.json`` figures keep DLIO's formulas (``results.dlio_summary``: nominal record
size, MiB and GiB); the console prints them too, under their DLIO names and DLIO's units, so
the two never pass for one another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Result = Mapping[str, Any]


@dataclass(frozen=True)
class Output:
    """Where an output keeps a figure: ``file`` (``result.json``, ``summary.json``,
    ``runs.csv``), the dotted ``path`` (or column) in it, and ``per_unit``: what that output
    stores for one of the figure's printed units (0.01 for a fraction printed in %)."""

    file: str
    path: str
    per_unit: float = 1.0


@dataclass(frozen=True)
class Figure:
    """One figure: its name, its console label, its unit, the function computing it (in
    that unit; None where the run has no such figure), its printed decimals, its outputs."""

    name: str
    label: str
    unit: str
    compute: Callable[[Result], float | None]
    decimals: int
    outputs: tuple[Output, ...] = ()
    console: bool = True  # the run's console summary prints it
    family: str = "training"  # the benchmark type whose runs have it (``family_of``)

    def value(self, result: Result) -> float | None:
        """The figure of ``result`` in its unit (None: not applicable to this run)."""
        if family_of(result) != self.family:
            return None
        try:
            value = self.compute(result)
        except (KeyError, TypeError, ZeroDivisionError):
            return None
        return None if value is None else float(value)

    def text(self, result: Result) -> str:
        """The figure as every output prints it: the value rounded, then the unit."""
        value = self.value(result)
        return "n/a" if value is None else f"{value:,.{self.decimals}f} {self.unit}"


def family_of(result: Result) -> str:
    """``training``, ``checkpoint`` (a checkpoint-only run), ``kvcache`` or ``vectordb``."""
    if result.get("kvcache") is not None:
        return "kvcache"
    if result.get("vectordb") is not None:
        return "vectordb"
    ckpt = result.get("checkpoint") or {}
    return "checkpoint" if ckpt.get("workflow") == "checkpoint-only" else "training"


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, Mapping):
            return None
        doc = doc.get(part)
    return doc


def _scaled(path: str, factor: float) -> Callable[[Result], float | None]:
    """``result.json``'s value at ``path`` times ``factor`` (None where it has none)."""

    def compute(result: Result) -> float | None:
        value = _get(result, path)
        return None if value is None else float(value) * factor

    return compute


def _dlio(key: str) -> Callable[[Result], float | None]:
    """A DLIO ``summary.json`` metric, by DLIO's own formula (``results.dlio_summary``)."""

    def compute(result: Result) -> float | None:
        from dliobench.results.dlio_summary import checkpoint_metric, train_metric

        workflow = (result.get("config") or {}).get("workflow") or {}
        if result.get("kvcache") is not None:
            return None
        if key.startswith("train_"):
            return train_metric(dict(result)).get(key) if workflow.get("train") else None
        return checkpoint_metric(dict(result)).get(key) if workflow.get("checkpoint") else None

    return compute


def _share(name: str) -> Callable[[Result], float | None]:
    def compute(result: Result) -> float | None:
        share = (result.get("time_shares") or {}).get(name)
        return None if share is None else 100.0 * share

    return compute


def _ckpt_op(op: str, key: str, factor: float) -> Callable[[Result], float | None]:
    """A checkpoint-only run's write or read figure (``checkpoint.<op>.<key>``)."""

    def compute(result: Result) -> float | None:
        ckpt = result.get("checkpoint") or {}
        if ckpt.get("workflow") != "checkpoint-only":
            return None
        value = (ckpt.get(op) or {}).get(key)
        return None if value is None else float(value) * factor

    return compute


def _train_ckpt(key: str) -> Callable[[Result], float | None]:
    """Checkpoints taken during training (``checkpoint.<key>``, bytes/s) in GB/s."""

    def compute(result: Result) -> float | None:
        ckpt = result.get("checkpoint") or {}
        if not ckpt or ckpt.get("workflow") == "checkpoint-only":
            return None
        value = ckpt.get(key)
        return None if value is None else float(value) / 1e9

    return compute


def _ckpt_csv(op: str) -> Callable[[Result], float | None]:
    """runs.csv's checkpoint rate: either workflow's write or read, in GB/s."""
    only, during = _ckpt_op(op, "aggregate_bytes_per_s", 1e-9), _train_ckpt(
        f"{op}_bytes_per_s")

    def compute(result: Result) -> float | None:
        value = only(result)
        return during(result) if value is None else value

    return compute


def _pct(path: str) -> Callable[[Result], float | None]:
    return _scaled(path, 100.0)


TRAINING: tuple[Figure, ...] = (
    Figure("au", "accelerator utilization", "%", _pct("metrics.au"), 1,
           (Output("result.json", "metrics.au", 0.01), Output("runs.csv", "au", 0.01))),
    Figure("au_worst_rank", "accelerator utilization (worst rank)", "%",
           _pct("metrics.au_min"), 1,
           (Output("result.json", "metrics.au_min", 0.01), Output("runs.csv", "au_min", 0.01))),
    Figure("au_floor", "accelerator utilization (floor)", "%", _pct("config.metric.au"), 1,
           (Output("result.json", "config.metric.au", 0.01),
            Output("runs.csv", "au_floor", 0.01))),
    Figure("samples_per_s", "throughput", "samples/s", _scaled("metrics.samples_per_s", 1), 1,
           (Output("result.json", "metrics.samples_per_s"),
            Output("runs.csv", "samples_per_s"))),
    Figure("read_MB_per_s", "throughput", "MB/s", _scaled("metrics.bytes_per_s", 1e-6), 1,
           (Output("result.json", "metrics.bytes_per_s", 1e6), Output("runs.csv", "mb_per_s"),
            Output("summary.json", "dliobench.read_MB_per_second"))),
    Figure("read_MiB_per_s", "throughput", "MiB/s", _scaled("metrics.bytes_per_s", 2**-20), 1,
           (Output("result.json", "metrics.bytes_per_s", 2**20),
            Output("summary.json", "dliobench.read_MiB_per_second"))),
    Figure("wait_p50_ms", "wait per step p50", "ms", _scaled("metrics.wait_p50_s", 1e3), 2,
           (Output("result.json", "metrics.wait_p50_s", 1e-3),
            Output("runs.csv", "wait_p50_ms"))),
    Figure("wait_p90_ms", "wait per step p90", "ms", _scaled("metrics.wait_p90_s", 1e3), 2,
           (Output("result.json", "metrics.wait_p90_s", 1e-3),)),
    Figure("wait_p99_ms", "wait per step p99", "ms", _scaled("metrics.wait_p99_s", 1e3), 2,
           (Output("result.json", "metrics.wait_p99_s", 1e-3),
            Output("runs.csv", "wait_p99_ms"))),
    Figure("wait_max_ms", "wait per step max", "ms", _scaled("metrics.wait_max_s", 1e3), 2,
           (Output("result.json", "metrics.wait_max_s", 1e-3),)),
    Figure("device_read_share", "read from the device", "%",
           _pct("honesty.device_read_share"), 1,
           (Output("result.json", "honesty.device_read_share", 0.01),)),
    *(Figure(f"time_{name}", f"where the time went: {name}", "%", _share(name), 1,
             (Output("result.json", f"time_shares.{name}", 0.01),))
      for name in ("compute", "wait", "comm", "checkpoint", "other")),
    # printed inside the verdict's reason when they decide it (results.verdict, run.judge)
    Figure("demand_samples_per_s_per_rank", "verdict: each rank needs", "samples/s",
           _scaled("verdict.demand_samples_per_s_per_rank", 1), 1,
           (Output("result.json", "verdict.demand_samples_per_s_per_rank"),), console=False),
    Figure("client_ceiling_samples_per_s_per_rank", "verdict: client ceiling", "samples/s",
           _scaled("verdict.client_ceiling_samples_per_s_per_rank", 1), 1,
           (Output("result.json", "verdict.client_ceiling_samples_per_s_per_rank"),),
           console=False),
    Figure("client_ceiling_unused", "verdict: client ceiling not used", "samples/s",
           _scaled("verdict.client_ceiling_unused.samples_per_s_per_rank", 1), 1,
           (Output("result.json", "verdict.client_ceiling_unused.samples_per_s_per_rank"),),
           console=False),
    Figure("delivered_samples_per_s_per_rank", "verdict: delivered per rank", "samples/s",
           _scaled("verdict.client_ceiling_unused.delivered_samples_per_s_per_rank", 1), 1,
           (Output("result.json",
                   "verdict.client_ceiling_unused.delivered_samples_per_s_per_rank"),),
           console=False),
    Figure("host_cpu_busy", "verdict: host CPUs busy", "%",
           _pct("verdict.host_cpu_busy_share"), 0,
           (Output("result.json", "verdict.host_cpu_busy_share", 0.01),), console=False),
    Figure("generation_GB_per_s", "generation", "GB/s",
           _scaled("generation.bytes_per_s", 1e-9), 3,
           (Output("result.json", "generation.bytes_per_s", 1e9),)),
    Figure("staging_GB_per_s", "staging", "GB/s", _scaled("staging.bytes_per_s", 1e-9), 3,
           (Output("result.json", "staging.bytes_per_s", 1e9),)),
    Figure("ckpt_write_GB_per_s", "checkpoints: write", "GB/s", _ckpt_csv("write"), 3,
           (Output("runs.csv", "ckpt_write_gb_per_s"),)),
    Figure("ckpt_read_GB_per_s", "checkpoints: read", "GB/s", _ckpt_csv("read"), 3,
           (Output("runs.csv", "ckpt_read_gb_per_s"),)),
    # DLIO's own figures, by DLIO's formulas, under DLIO's names and units
    Figure("train_au_mean_percentage", "DLIO train_au_mean_percentage", "%",
           _dlio("train_au_mean_percentage"), 1,
           (Output("summary.json", "metric.train_au_mean_percentage"),)),
    Figure("train_throughput_mean_samples_per_second",
           "DLIO train_throughput_mean_samples_per_second", "samples/s",
           _dlio("train_throughput_mean_samples_per_second"), 1,
           (Output("summary.json", "metric.train_throughput_mean_samples_per_second"),)),
    Figure("train_io_mean_MB_per_second", "DLIO train_io_mean_MB_per_second", "MiB/s",
           _dlio("train_io_mean_MB_per_second"), 1,
           (Output("summary.json", "metric.train_io_mean_MB_per_second"),)),
)

CHECKPOINT: tuple[Figure, ...] = tuple(
    fig for op, dlio in (("write", "save"), ("read", "load")) for fig in (
        Figure(f"ckpt_{op}_aggregate_GB_per_s", f"{op}: aggregate", "GB/s",
               _ckpt_op(op, "aggregate_bytes_per_s", 1e-9), 3,
               (Output("result.json", f"checkpoint.{op}.aggregate_bytes_per_s", 1e9),
                Output("runs.csv", f"ckpt_{op}_gb_per_s"))),
        *(Figure(f"ckpt_{op}_aggregate_{q}_GB_per_s", f"{op}: aggregate {q}", "GB/s",
                 _ckpt_op(op, f"aggregate_bytes_per_s_{q}", 1e-9), 3,
                 (Output("result.json", f"checkpoint.{op}.aggregate_bytes_per_s_{q}", 1e9),))
          for q in ("p50", "p99")),
        Figure(f"ckpt_{op}_slowest_rank_GB_per_s", f"{op}: throughput (slowest rank)", "GB/s",
               _ckpt_op(op, "throughput_bytes_per_s_mean", 1e-9), 3,
               (Output("result.json", f"checkpoint.{op}.throughput_bytes_per_s_mean", 1e9),)),
        Figure(f"ckpt_{op}_duration_s", f"{op}: duration (slowest rank)", "s",
               _ckpt_op(op, "duration_s_mean", 1), 3,
               (Output("result.json", f"checkpoint.{op}.duration_s_mean"),
                Output("summary.json", f"metric.{dlio}_checkpoint_duration_mean_seconds"))),
        Figure(f"{dlio}_checkpoint_io_mean_GB_per_second",
               f"DLIO {dlio}_checkpoint_io_mean_GB_per_second", "GiB/s",
               _dlio(f"{dlio}_checkpoint_io_mean_GB_per_second"), 3,
               (Output("summary.json", f"metric.{dlio}_checkpoint_io_mean_GB_per_second"),)),
    ))
CHECKPOINT = tuple(dataclasses.replace(f, family="checkpoint") for f in CHECKPOINT)

KVCACHE: tuple[Figure, ...] = (
    Figure("kv_tokens_per_s", "throughput", "tokens/s",
           _scaled("kvcache.avg_throughput_tokens_per_sec", 1), 1,
           (Output("result.json", "kvcache.avg_throughput_tokens_per_sec"),
            Output("summary.json", "summary.avg_throughput_tokens_per_sec"))),
    Figure("kv_requests_per_s", "requests", "requests/s", _scaled("kvcache.requests_per_second", 1),
           1, (Output("result.json", "kvcache.requests_per_second"),
               Output("summary.json", "summary.requests_per_second"))),
    Figure("kv_e2e_p50_ms", "end to end p50", "ms",
           _scaled("kvcache.end_to_end_latency_ms.p50", 1), 2,
           (Output("result.json", "kvcache.end_to_end_latency_ms.p50"),)),
    Figure("kv_e2e_p95_ms", "end to end p95", "ms",
           _scaled("kvcache.end_to_end_latency_ms.p95", 1), 2,
           (Output("result.json", "kvcache.end_to_end_latency_ms.p95"),)),
)

KVCACHE = tuple(dataclasses.replace(f, family="kvcache") for f in KVCACHE)


def _vdb_latency(p: str, upstream: str) -> Figure:
    """A query latency percentile: result.json's, and upstream's name in summary.json."""
    return Figure(f"vdb_{p}_ms", f"latency {p}", "ms", _scaled(f"vectordb.latency_ms.{p}", 1),
                  2, (Output("result.json", f"vectordb.latency_ms.{p}"),
                      Output("summary.json", upstream)))


VECTORDB: tuple[Figure, ...] = tuple(dataclasses.replace(f, family="vectordb") for f in (
    Figure("vdb_qps", "throughput", "queries/s", _scaled("vectordb.qps", 1), 1,
           (Output("result.json", "vectordb.qps"), Output("summary.json", "throughput_qps"))),
    Figure("vdb_recall", "recall@k", "", _scaled("vectordb.recall", 1), 4,
           (Output("result.json", "vectordb.recall"), Output("summary.json", "recall"))),
    *(_vdb_latency(p, name) for p, name in (
        ("p50", "median_latency_ms"), ("p95", "p95_latency_ms"), ("p99", "p99_latency_ms"),
        ("p999", "p999_latency_ms"))),
))
FIGURES: tuple[Figure, ...] = TRAINING + CHECKPOINT + KVCACHE + VECTORDB
BY_NAME: dict[str, Figure] = {f.name: f for f in FIGURES}


def figure(name: str) -> Figure:
    """The figure called ``name`` (a KeyError names a figure missing from the table)."""
    return BY_NAME[name]


def text(name: str, result: Result) -> str:
    """``figure(name).text(result)``: how every output prints that figure of the run."""
    return BY_NAME[name].text(result)


def dlio_line(result: Result, names: tuple[str, ...]) -> str | None:
    """DLIO's figures of ``names`` as the console prints them beside ours, or None."""
    parts = [f"{BY_NAME[n].label.removeprefix('DLIO ')} {BY_NAME[n].text(result)}"
             for n in names if BY_NAME[n].value(result) is not None]
    return "; ".join(parts) or None


def stored(figure: Figure, output: Output, result: Result) -> float | None:
    """What ``output`` stores for ``figure`` of ``result``: the figure's value times the
    output's ``per_unit``."""
    value = figure.value(result)
    return None if value is None else value * output.per_unit


def fill(doc: dict[str, Any], result: Result, file: str, under: str) -> dict[str, Any]:
    """Write into ``doc`` every figure that ``file`` keeps under its section ``under``
    (``summary.json``'s ``dliobench`` section), computed here, not by the writer."""
    for fig in FIGURES:
        for out in fig.outputs:
            if out.file == file and out.path.startswith(under + "."):
                value = stored(fig, out, result)
                if value is not None:
                    doc.setdefault(under, {})[out.path[len(under) + 1:]] = value
    return doc


def markdown() -> str:
    """The table of figures as docs/results.md holds it."""
    rows = ["| figure | unit | computed by | outputs (stored per printed unit) |",
            "|---|---|---|---|"]
    for f in FIGURES:
        where = ", ".join(f"{o.file} `{o.path}`" + ("" if o.per_unit == 1 else
                                                   f" (x{o.per_unit:g})") for o in f.outputs)
        shown = "console, " if f.console else ""
        rows.append(f"| `{f.name}` | {f.unit} | {f.label} | {shown}{where} |")
    return "\n".join(rows)
