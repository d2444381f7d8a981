"""The ``checkpoint`` section of ``result.json`` (results/schema.py holds the document)."""

from __future__ import annotations

from typing import Any, TypedDict


class CheckpointOps(TypedDict, total=False):
    """``checkpoint.write`` / ``checkpoint.read`` of a checkpoint-only run."""

    count: int
    bytes: int
    bytes_per_checkpoint: float
    duration_s_mean: float
    throughput_bytes_per_s_mean: float | None
    aggregate_bytes_per_s: float | None
    aggregate_bytes_per_s_p50: float | None
    aggregate_bytes_per_s_p99: float | None
    rank_s_p50: float | None
    rank_s_p99: float | None
    checkpoints: list[dict[str, Any]]


class CheckpointReadHonesty(TypedDict, total=False):
    """``checkpoint.read_honesty``: could the checkpoint reads come from the page cache?"""

    evicted: bool
    written_bytes: int
    host_memory_bytes: int
    written_to_memory_ratio: float | None
    reads_honest: bool
    made_honest_by: str | None


class Checkpoint(TypedDict, total=False):
    """``checkpoint``: checkpoints taken during training (count .. checkpoints), or a
    checkpoint-only run's layout, writes and reads (workflow .. read_honesty)."""

    count: int
    bytes: int
    write_bytes_per_s: float | None
    read_bytes_per_s: float | None
    checkpoints: list[dict[str, Any]]
    workflow: str
    file_format: str
    fsync: bool
    layout: dict[str, Any]
    files_per_checkpoint: int
    write: CheckpointOps | None
    read: CheckpointOps | None
    read_honesty: CheckpointReadHonesty
