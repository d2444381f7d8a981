"""The one answer to "did this run's measured reads come from storage, or maybe from RAM?".

``read_origin`` decides, from the read mode and the measured share of the bytes delivered that
came from below the page cache (today the storage device's counter), and every output prints
its answer: the run's console (its line "reads from storage" and its notes), ``result.json``'s
``honesty.page_cache_possible``, ``summary.json``, ``runs.csv`` and the report's banner, and
``dliobench check``. A checkpoint-only run reads checkpoints (its ``checkpoint.read_honesty``
decides), a KV-cache run its storage tier, a training run its dataset (its ``honesty`` block).

The rule (docs/results.md, "Where the bytes came from"): where the share was measured it
decides: under ``FROM_CACHE_MAX`` (5 %) the page cache served the reads, at or above
``FROM_STORAGE_MIN`` (95 %) storage did, in between both did ("partly"). Where it was not
measured, the setup decides: O_DIRECT, eviction before each epoch, a dataset of at least 5x
the hosts' memory, or an object store make the reads storage's; otherwise they are "not
ensured".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dliobench.results.schema import RunResult
from dliobench.results.verdict import DEVICE_SHARE_MIN

FROM_CACHE_MAX = DEVICE_SHARE_MIN  # below: the page cache served the reads (as the verdict)
FROM_STORAGE_MIN = 0.95  # at or above: storage served them


@dataclass(frozen=True)
class ReadOrigin:
    """Where a run's measured reads came from: ``state`` is ``storage``, ``partly``,
    ``page cache``, ``not ensured`` or ``no reads``; ``how`` says what made them storage's
    (``O_DIRECT``, ``evicted``, ...) or how it was measured; ``share``: the measured share of
    the bytes delivered that came from below the cache (None: not measured)."""

    state: str
    how: str | None = None
    share: float | None = None

    @property
    def page_cache_possible(self) -> bool | None:
        """True when some of the measured bytes may have come from this host's memory, None
        when the run measured no reads."""
        return None if self.state == "no reads" else self.state != "storage"

    def words(self) -> str:
        """The line every output prints ("reads from storage")."""
        share = "" if self.share is None else f"{self.share:.0%}"
        return {"storage": f"yes ({self.how})",
                "partly": f"partly: {share} from the device, the rest from the page cache",
                "page cache": f"no: {share} from the device, the rest from the page cache",
                "not ensured": "not ensured: may have come from the page cache",
                "no reads": ""}[self.state]


def dataset_origin(honesty: dict[str, Any], object_store: bool) -> ReadOrigin:
    """A training run's reads, from its ``honesty`` block (the measured share decides)."""
    share = honesty.get("device_read_share")
    if share is not None:
        if share < FROM_CACHE_MAX:
            return ReadOrigin("page cache", "measured", share)
        if share >= FROM_STORAGE_MIN:
            how = "O_DIRECT" if honesty.get("odirect") else "evicted" if honesty.get(
                "evicted") else f"{min(share, 1.0):.0%} read from the device"
            return ReadOrigin("storage", how, share)
        return ReadOrigin("partly", "measured", share)
    if honesty.get("odirect"):
        return ReadOrigin("storage", "O_DIRECT")
    if honesty.get("evicted"):
        return ReadOrigin("storage", "evicted")
    if (honesty.get("dataset_to_memory_ratio") or 0) >= 5:
        return ReadOrigin("storage", "dataset >= 5x memory")
    if object_store:
        return ReadOrigin("storage", "an object store: not this host's page cache")
    return ReadOrigin("not ensured")


def _checkpoint_only(result: RunResult) -> dict[str, Any] | None:
    ckpt = result.get("checkpoint") or {}
    return ckpt if ckpt.get("workflow") == "checkpoint-only" else None


def _object_store(result: RunResult) -> bool:
    return str((result.get("storage") or {}).get("fs_type")) == "s3"


def _kvcache_origin(kv: dict[str, Any], object_store: bool) -> ReadOrigin:
    """A KV-cache run's storage tier: O_DIRECT or an object store, else not ensured."""
    if not ((kv.get("tiers") or {}).get("storage") or {}).get("read_bytes"):
        return ReadOrigin("no reads")
    if kv.get("direct_io"):
        return ReadOrigin("storage", "O_DIRECT")
    if object_store:
        return ReadOrigin("storage", "an object store: not this host's page cache")
    return ReadOrigin("not ensured")


def _vectordb_origin(v: dict[str, Any], fs_type: str) -> ReadOrigin:
    """A vector-database run's index reads: DiskANN opens its index with O_DIRECT (a memory
    file system's O_DIRECT still reads memory)."""
    if not v.get("queries"):
        return ReadOrigin("no reads")
    if fs_type in ("tmpfs", "ramfs"):
        return ReadOrigin("not ensured")
    return ReadOrigin("storage", "O_DIRECT, DiskANN's reader")


def read_origin(result: RunResult) -> ReadOrigin:
    """Where ``result``'s measured reads came from (the one rule; see the module)."""
    kv = result.get("kvcache")
    if kv is not None:
        return _kvcache_origin(kv, _object_store(result))
    vdb = result.get("vectordb")
    if vdb is not None:
        return _vectordb_origin(vdb, str((result.get("storage") or {}).get("fs_type")))
    ckpt = _checkpoint_only(result)
    if ckpt is not None:
        if not ckpt.get("read"):
            return ReadOrigin("no reads")
        how = (ckpt.get("read_honesty") or {}).get("made_honest_by")
        return ReadOrigin("storage", str(how)) if how else ReadOrigin("not ensured")
    return dataset_origin(dict(result.get("honesty") or {}), _object_store(result))


def page_cache_possible(result: RunResult) -> bool | None:
    """``read_origin(result).page_cache_possible``."""
    return read_origin(result).page_cache_possible


def made_storage_reads_by(result: RunResult) -> str | None:
    """What made the reads reach storage (``evicted``, ``O_DIRECT``, ...), None when nothing
    did or the run read nothing."""
    origin = read_origin(result)
    return origin.how if origin.state == "storage" else None
