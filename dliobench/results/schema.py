"""The ``result.json`` document as types: what a run writes and every reader reads.

The keys are an interface (README, "Result files"): scripts, ``dliobench report``, sweeps and
the max-accelerator search read them. ``schema_version`` is ``MAJOR`` (an int, as version 1
always wrote) or ``"MAJOR.MINOR"``: a reader refuses another major version and reads newer
minor versions, keeping fields it does not know.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 5  # 1.1: verdict, time_shares, per-rank cpu, timeline.csv counted; 1.2: provenance;
# 1.3: metadata (the metadata phase); 1.4: metrics.requests (object-store request latency);
# 1.5: honesty.device_read_* and ranks[].device_read_bytes (bytes read from the device)
SCHEMA_VERSION: int | str = SCHEMA_MAJOR if SCHEMA_MINOR == 0 else f"{SCHEMA_MAJOR}.{SCHEMA_MINOR}"


class RateMetrics(TypedDict):
    """Figures over the counted steps (None where there were too few to count)."""

    au: float | None
    samples_per_s: float | None
    bytes_per_s: float | None
    wait_p50_s: float | None
    wait_p90_s: float | None
    wait_p99_s: float | None
    wait_max_s: float | None
    steps: int
    samples: int
    bytes: int
    compute_s: float
    comm_s: float
    first_step_s: float | None


class RequestLatency(TypedDict):
    """``metrics.requests``: an object store's GETs during training, all ranks, seconds to
    the first byte and to the last (percentiles within 1.2 %, maxima exact)."""

    requests: int
    first_byte_p50_s: float | None
    first_byte_p99_s: float | None
    first_byte_max_s: float | None
    total_p50_s: float | None
    total_p99_s: float | None
    total_max_s: float | None


class RunMetrics(RateMetrics):
    """``metrics``: the run's figures over all ranks and epochs."""

    au_min: float | None
    exactly_once: bool
    undelivered_samples: int
    min_counted_steps: int
    stragglers: list[int]
    requests: NotRequired[RequestLatency]  # S3 runs (schema 1.4)


class EpochMetrics(RateMetrics):
    """One entry of ``epochs``."""

    epoch: int
    exactly_once: bool
    complete: bool


class RankMetrics(TypedDict):
    """One entry of ``ranks``."""

    rank: int
    host: str
    au: float | None
    samples: int
    bytes: int
    samples_per_s: float | None
    bytes_per_s: float | None
    wall_s: float
    epochs: list[dict[str, Any]]


class NodeMetrics(TypedDict):
    """One entry of ``nodes``."""

    host: str
    ranks: list[int]
    au: float | None
    samples_per_s: float
    bytes_per_s: float


class Honesty(TypedDict):
    """``honesty``: could the figures come from memory, or from before the window?"""

    readahead_share: float | None
    window_too_short: bool
    dataset_bytes: int
    host_memory_bytes: int
    dataset_to_memory_ratio: float | None
    odirect: bool
    evicted: bool
    page_cache_possible: bool
    data_origin: NotRequired[str]  # whose files were read: generated, or existing (whose)
    # 1.5: bytes read from the storage device from each epoch's first read to the end of its
    # counted window, summed over ranks (None: the counter cannot see them), their share of the
    # bytes delivered in those steps, and how they were measured (or why not)
    device_read_bytes: NotRequired[int | None]
    device_read_share: NotRequired[float | None]
    device_read_counter: NotRequired[str]


class _Required(TypedDict):
    schema_version: int | str
    run_id: str
    status: str  # "complete" or "partial"
    dliobench_version: str
    commit: str | None
    started_at: str
    finished_at: str
    workload: str
    ranks_count: int
    config: dict[str, Any]  # every section of the resolved configuration
    machine: dict[str, Any]
    storage: dict[str, Any]
    honesty: Honesty
    metrics: RunMetrics
    epochs: list[EpochMetrics]
    ranks: list[RankMetrics]
    nodes: list[NodeMetrics]


class RunResult(_Required, total=False):
    """The whole ``result.json``; the optional keys appear when they apply."""

    errors: list[str]
    deviations: list[str]
    warnings: list[str]
    ranks_launched: int
    launcher: str  # what started the ranks: "mpi", "torch" or "none"
    generation: dict[str, Any]
    staging: dict[str, Any]
    checkpoint: dict[str, Any]
    verdict: dict[str, Any]  # 1.1: meets_floor, limiter, reason and the figures behind them
    time_shares: dict[str, float] | None  # 1.1: compute, wait, comm, checkpoint, other
    provenance: dict[str, Any]  # 1.2: config_sha256, argv, cwd, packages, mpi_library
    metadata: dict[str, Any]  # 1.3: the metadata phase's rates and latencies


def parse_version(value: object) -> tuple[int, int] | None:
    """(major, minor) of a ``schema_version`` value, or None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value, 0
    if isinstance(value, str):
        major, _, minor = value.partition(".")
        if major.isdigit() and (minor.isdigit() or not minor):
            return int(major), int(minor or 0)
    return None
