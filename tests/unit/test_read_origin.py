"""The one page-cache rule (issue 49, item 4): the read mode and the measured share of the
bytes that came from below the cache decide, and a run partly served by the cache is said to
be partly served, not "yes"."""

from __future__ import annotations

from typing import Any, cast

from dliobench.results.schema import RunResult
from dliobench.results.storage_reads import dataset_origin, read_origin


def _training(**honesty: Any) -> RunResult:
    return cast(RunResult, {"honesty": {"odirect": False, "evicted": False,
                                        "dataset_to_memory_ratio": 0.1, **honesty}})


def test_a_measured_share_decides_over_the_setup() -> None:
    partly = read_origin(_training(device_read_share=0.31, evicted=True))
    assert partly.state == "partly" and partly.page_cache_possible is True
    assert partly.words() == "partly: 31% from the device, the rest from the page cache"
    cached = read_origin(_training(device_read_share=0.02, odirect=True))
    assert cached.state == "page cache" and cached.page_cache_possible
    direct = read_origin(_training(device_read_share=1.0, odirect=True))
    assert direct.words() == "yes (O_DIRECT)" and direct.page_cache_possible is False


def test_without_a_measured_share_the_setup_decides() -> None:
    assert read_origin(_training(device_read_share=None, odirect=True)).state == "storage"
    assert read_origin(_training(device_read_share=None)).words().startswith("not ensured")
    assert dataset_origin({"dataset_to_memory_ratio": 6.0}, False).how == "dataset >= 5x memory"
    assert dataset_origin({}, True).state == "storage"  # an object store


def test_a_kvcache_storage_tier_read_with_o_direct_is_storage() -> None:
    def kv(direct: bool, read: int) -> RunResult:
        return cast(RunResult, {"kvcache": {"direct_io": direct,
                                            "tiers": {"storage": {"read_bytes": read}}}})

    assert read_origin(kv(True, 10)).words() == "yes (O_DIRECT)"
    assert read_origin(kv(False, 10)).state == "not ensured"
    assert read_origin(kv(True, 0)).page_cache_possible is None


def test_a_checkpoint_only_run_is_judged_by_its_checkpoint_reads() -> None:
    def ckpt(how: str | None, read: bool = True) -> RunResult:
        return cast(RunResult, {"honesty": {"page_cache_possible": True}, "checkpoint": {
            "workflow": "checkpoint-only", "read": {"count": 1} if read else None,
            "read_honesty": {"made_honest_by": how}}})

    assert read_origin(ckpt("evicted")).words() == "yes (evicted)"
    assert read_origin(ckpt(None)).page_cache_possible is True
    assert read_origin(ckpt(None, read=False)).state == "no reads"
