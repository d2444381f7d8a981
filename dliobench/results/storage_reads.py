"""The one answer to "did this run's measured reads come from storage, or maybe from RAM?".

The console line of a run, its warnings and ``dliobench report``'s banner all ask it here, so
they cannot disagree: a checkpoint-only run reads checkpoints (its ``checkpoint.read_honesty``
decides), a training run reads its dataset (its ``honesty`` block decides).
"""

from __future__ import annotations

from typing import Any

from dliobench.results.schema import RunResult
from dliobench.results.verdict import DEVICE_SHARE_MIN


def _checkpoint_only(result: RunResult) -> dict[str, Any] | None:
    ckpt = result.get("checkpoint") or {}
    return ckpt if ckpt.get("workflow") == "checkpoint-only" else None


def page_cache_possible(result: RunResult) -> bool | None:
    """True when the run's measured reads may have come from this host's page cache, False
    when they came from storage, None when it measured no reads (a write-only checkpoint run).

    A training run whose device reads were measured (``honesty.device_read_share``) is
    judged by them, as its verdict is. A checkpoint-only run reads no dataset, so the
    dataset's honesty block (which says "possible" for a 0-byte dataset) does not apply to it:
    its checkpoint reads do.
    """
    ckpt = _checkpoint_only(result)
    if ckpt is not None:
        if not ckpt.get("read"):
            return None
        return (ckpt.get("read_honesty") or {}).get("made_honest_by") is None
    honesty = result.get("honesty") or {}
    share = honesty.get("device_read_share")
    if share is not None:  # measured: what the device delivered decides, not the setup
        return bool(share < DEVICE_SHARE_MIN)
    possible = honesty.get("page_cache_possible")
    return None if possible is None else bool(possible)


def made_storage_reads_by(result: RunResult) -> str | None:
    """What made the reads reach storage (``evicted``, ``O_DIRECT``, ...), None when nothing
    did or the run read nothing."""
    if page_cache_possible(result) is not False:
        return None
    ckpt = _checkpoint_only(result)
    if ckpt is not None:
        return str(ckpt["read_honesty"]["made_honest_by"])
    honesty = result.get("honesty") or {}
    if honesty.get("odirect"):
        return "O_DIRECT"
    if honesty.get("evicted"):
        return "evicted"
    if (honesty.get("dataset_to_memory_ratio") or 0) >= 5:
        return "dataset >= 5x memory"
    share = honesty.get("device_read_share")
    return "not on this host" if share is None else f"{share:.0%} read from the device"
