"""The ``result.json`` document as types: what a run writes and every reader reads.

The keys are an interface (docs/results.md, "Result files"): scripts, ``dliobench report``,
sweeps and the max-accelerator search read them. ``schema_version`` is ``MAJOR`` (an int, as
version 1 always wrote) or ``"MAJOR.MINOR"``: a reader refuses another major version and reads
newer minor versions, keeping fields it does not know.

The types below are also the check made on reading (``results.typed.first_mismatch``): every
field declared here, nested ones too, must hold its declared type where it is present, so a
damaged or edited file is one sentence naming the field rather than a blank figure or a
traceback in a reader.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

from dliobench.results.schema_checkpoint import Checkpoint

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 15  # 1.1: verdict, time_shares, per-rank cpu, timeline.csv counted; 1.2: provenance;
# 1.3: metadata (the metadata phase); 1.4: metrics.requests (object-store request latency);
# 1.5: honesty.device_read_* and ranks[].device_read_bytes (bytes read from the device);
# 1.6: ranks_ended (a partial result: where each launched rank's journaled records end, why)
# 1.7: run_set (the run's place in a `run --repeat` set: set id, index, count, warm-up)
# 1.8: per-node truth: nodes[] samples, bytes, wait, CPU share, staging, machine and memory;
# metrics.straggler_nodes; staging.nodes; honesty.host_memory_bytes adds every machine once
# 1.9: kvcache (a KV-cache run's figures under upstream's names, its tiers and verdict)
# 1.10: kvcache.autoscaling (--enable-autoscaling: the users' timeline, final and peak users)
# 1.11: machine.cpu_model; honesty.page_cache_possible from the one rule (results.storage_reads)
# 1.12: nodes[].host_cpu_busy_share (the host's CPUs over the counted windows) and the
# verdict's host_cpu_busy_* and client_ceiling_unused (the client rules, docs/results.md)
# 1.13: nodes[] wire_*, link_*, verdict: what crossed the wire per node, its link, its limit
# 1.14: vectordb (a vector-database run: QPS, latency, recall@k, reads per query, verdict)
# 1.15: nodes[].link_use_waiting (the link's use while the node's ranks waited)
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
    wait_s: NotRequired[float]
    ckpt_s: NotRequired[float]
    wall_s: NotRequired[float]


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
    exactly_once: bool | None  # None: a rank was interrupted, nothing to check
    undelivered_samples: int
    min_counted_steps: int
    stragglers: list[int]
    straggler_nodes: NotRequired[list[str]]  # 1.7: hosts below 90 % of the median node
    requests: NotRequired[RequestLatency]  # S3 runs (schema 1.4)


class EpochMetrics(RateMetrics):
    """One entry of ``epochs``."""

    epoch: int
    au_min: NotRequired[float | None]
    exactly_once: bool | None  # None: a rank was interrupted in this epoch
    complete: bool


class RankEpoch(TypedDict):
    """One entry of ``ranks[].epochs``: what the rank's exactly-once check found."""

    epoch: int
    planned: int
    delivered: int
    undelivered: int
    complete: bool
    exactly_once: bool


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
    epochs: list[RankEpoch]
    steps: NotRequired[int]
    compute_s: NotRequired[float]
    comm_s: NotRequired[float]
    wait_s: NotRequired[float]
    ckpt_s: NotRequired[float]
    cpu_s: NotRequired[float]  # 1.1
    cpu_cores: NotRequired[float]
    cpu_share: NotRequired[float | None]
    device_read_bytes: NotRequired[int | None]  # 1.5


class NodeMetrics(TypedDict):
    """One entry of ``nodes``."""

    host: str
    ranks: list[int]
    au: float | None
    samples_per_s: float
    bytes_per_s: float
    samples: NotRequired[int]  # 1.7
    bytes: NotRequired[int]
    wait_s: NotRequired[float]
    wait_share: NotRequired[float | None]
    cpu_share: NotRequired[float | None]
    staging_s: NotRequired[float | None]
    staging_bytes: NotRequired[int | None]
    machine_id: NotRequired[str]
    memory_bytes: NotRequired[int]
    host_cpu_busy_share: NotRequired[float | None]  # 1.12: /proc/stat, counted windows
    # 1.13 (results/node_wire.py): bytes that crossed the wire to the node in its counted
    # windows (None: no counter), the counter, the windows' seconds, the link's rate and its
    # source, the wire's share of the bytes delivered, the link's use, the node's verdict
    wire_bytes: NotRequired[int | None]
    wire_counter: NotRequired[str]
    wire_window_s: NotRequired[float]
    wire_share: NotRequired[float | None]
    link_bytes_per_s: NotRequired[float | None]
    link_source: NotRequired[str]
    link_use: NotRequired[float | None]
    link_use_waiting: NotRequired[float | None]  # 1.15: over its ranks' waits
    verdict: NotRequired[NodeVerdict]


class NodeVerdict(TypedDict):
    """``nodes[].verdict``: what set the node's pace (results/node_verdict.py)."""

    limit: str
    reason: str


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


class Machine(TypedDict, total=False):
    """``machine``: the hosts of the run and rank 0's host."""

    hosts: list[str]
    host: str
    cpus: int | None
    memory_bytes: int
    cpu_model: str  # 1.11: /proc/cpuinfo's model name (summary.json's host_processor_name)
    platform: str
    python: str


class Verdict(TypedDict, total=False):
    """``verdict`` (1.1): did the run meet its AU floor, what limited it, and the figures."""

    meets_floor: bool | None
    limiter: str
    reason: str
    au: float | None
    au_floor: float
    demand_samples_per_s_per_rank: float | None
    client_ceiling_samples_per_s_per_rank: float | None
    client_ceiling_source: str | None
    client_ceiling_load: dict[str, float] | None
    device_read_share: float | None
    host_cpu_busy_share: float | None  # 1.12: the busiest host's, over the counted windows
    host_cpu_busy_host: str | None
    host_cpu_busy_min: float | None  # the share at which a run that waited is the client's
    client_ceiling_unused: dict[str, float]  # a ceiling below what the run delivered


class TimeShares(TypedDict, total=False):
    """``time_shares`` (1.1): shares of the counted wall time, summed over ranks."""

    compute: float
    wait: float
    comm: float
    checkpoint: float
    other: float


class Provenance(TypedDict, total=False):
    """``provenance`` (1.2): what made the run, to tell an edited result."""

    config_sha256: str
    argv: list[str]
    cwd: str
    packages: dict[str, str | None]
    mpi_library: str | None


class Generation(TypedDict, total=False):
    """``generation``: the files the run generated first."""

    files: int
    bytes: int
    mean_file_bytes: float
    seconds: float
    bytes_per_s: float | None


class Staging(TypedDict, total=False):
    """``staging``: the copy of the dataset the run read."""

    source: str
    scope: str
    path: str
    files: int
    bytes: int
    seconds: float
    bytes_per_s: float | None
    nodes: list[dict[str, Any]]  # 1.7: per host: files, bytes, seconds (its slowest rank)


class LastStep(TypedDict):
    """The last step a rank journaled."""

    epoch: int
    step: int
    t_start_s: float


class RankEnding(TypedDict):
    """Where one launched rank's journaled records end, and why (``results/recover.py``)."""

    rank: int
    steps: int
    last_step: LastStep | None
    ended: str  # complete, error, terminated, stalled, lost a peer, no end record, no journal
    why: str
    host: NotRequired[str]
    last_record_at: NotRequired[str | None]
    damaged_records: NotRequired[int]


class RunSetPlace(TypedDict):
    """The run's place in its set (``run.runset``)."""

    set_id: str
    index: int  # 0-based, the warm-up first
    count: int  # runs planned in the set, the warm-up included
    warmup: bool  # the set's warm-up: not scored
    phase: str  # training, or checkpointing's write+read, write or read
    split: NotRequired[dict[str, Any]]  # a split checkpoint set's read phase: gap_s after
    # the write set's end (Rules.md §4.7.1), timed_from, write_set_id, write_ended_at, ...


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
    machine: Annotated[dict[str, Any], Machine]
    storage: dict[str, Any]  # the backend's facts (a file system's, an object store's)
    honesty: Honesty
    metrics: RunMetrics
    epochs: list[EpochMetrics]
    ranks: list[RankMetrics]
    nodes: list[NodeMetrics]


class RunResult(_Required, total=False):
    """The whole ``result.json``; the optional keys appear when they apply.

    ``Annotated[static, checked]``: a section writers build as a plain dict (its static
    type) whose fields the TypedDict ``checked`` declares, and reading checks."""

    errors: list[str]
    deviations: list[str]
    warnings: list[str]
    ranks_launched: int
    launcher: str  # what started the ranks: "slurm", "mpi", "torch" or "none"
    generation: Annotated[dict[str, Any], Generation]
    staging: Annotated[dict[str, Any], Staging]
    checkpoint: Annotated[dict[str, Any], Checkpoint]
    verdict: Annotated[dict[str, Any], Verdict]  # 1.1
    time_shares: Annotated[dict[str, float] | None, TimeShares | None]  # 1.1
    provenance: Annotated[dict[str, Any], Provenance]  # 1.2
    metadata: dict[str, Any]  # 1.3: the metadata phase's rates and latencies
    ranks_ended: list[RankEnding]  # 1.6
    run_set: RunSetPlace  # 1.7
    kvcache: dict[str, Any]  # 1.9: a KV-cache run (results/kv_section.py)
    vectordb: dict[str, Any]  # 1.14: a vector-database run (results/vdb_figures.py)


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

