"""What a rank measured during training, as plain records: gathered by rank 0 into a result.

These live with the results (not the training loop) so that assembling a result needs
nothing from the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dliobench.results.hostcpu import HostCpu
from dliobench.results.timeline import Timeline
from dliobench.storage.devreads import DeviceReads
from dliobench.storage.latency import LatencyLog


@dataclass
class EpochCheck:
    """Did the epoch deliver the rank's planned samples, each at most once, none foreign?

    ``undelivered`` samples of the rank's shard were left out on purpose: the last partial
    batch (``reader.drop_last``), steps evened out across ranks, or total_training_steps.
    """

    epoch: int
    planned: int
    delivered: int
    undelivered: int
    complete: bool
    exactly_once: bool


@dataclass(frozen=True)
class CheckpointEvent:
    """One checkpoint as seen by one rank."""

    index: int
    epoch: int
    step: int
    nbytes: int
    write_s: float
    read_s: float | None


@dataclass(frozen=True)
class CheckpointOp:
    """One write or read of a whole checkpoint by one rank (the checkpoint-only workflow)."""

    op: str  # "write" or "read"
    index: int
    nbytes: int
    seconds: float
    files: int


@dataclass
class RankTrace:
    """Everything one rank measured, to be gathered by rank 0."""

    rank: int
    host: str
    timeline: Timeline
    checks: list[EpochCheck] = field(default_factory=list)
    checkpoints: list[CheckpointEvent] = field(default_factory=list)
    checkpoint_ops: list[CheckpointOp] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)
    error: str | None = None
    cpu_s: float = 0.0  # user + system CPU of the rank's process and its loader workers
    cpu_wall_s: float = 0.0  # the training time cpu_s was measured over
    cpu_cores: float = 0.0  # cores this rank may use (its affinity shared with its node's)
    requests: LatencyLog | None = None  # its object-store reads' latencies (S3 runs)
    device_reads: DeviceReads | None = None  # device bytes, epoch starts to window ends
    machine_id: str = ""  # the kernel's boot id: emulated nodes of one machine share it
    memory_bytes: int = 0  # its machine's memory (the page-cache rule adds machines')
    host_cpu: HostCpu | None = None  # its host's CPUs over the counted windows (1.12)
