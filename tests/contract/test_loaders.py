"""LoaderContract: the suite every registered loader passes (``loaders.REGISTRY``).

Across R simulated ranks (one loader per rank in this process) each sample is delivered
exactly once per epoch (drop_last aside); orders follow the seeded plan; bytes are counted at
the read call, in worker processes too; close() releases the workers.
"""

from __future__ import annotations

import gc
import importlib
import weakref
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dliobench.base.errors import MissingExtraError
from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.dataset.plan import Plan
from dliobench.dataset.prepare import prepare
from dliobench.dataset.sharding import batches, rank_samples
from dliobench.loaders import LOADERS, REGISTRY, make_loader
from dliobench.run.planning import resolve


def installed(name: str) -> bool:
    """Whether a registered loader's extra (torch, DALI) is installed."""
    try:
        importlib.import_module(REGISTRY[name])
    except MissingExtraError:
        return False
    return True


def dataset(tmp_path: Path, *overrides: str) -> Plan:
    """A generated 7-file dataset and its one-rank plan (with the files' real sizes)."""
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path / 'data'}", "dataset.num_files_train=7",
                         "dataset.num_samples_per_file=3", "dataset.record_length_bytes=4096",
                         "reader.batch_size=2", "reader.read_threads=2", *overrides])
    plan = resolve(cfg, World.single(), LocalComm())
    return prepare(plan, World.single(), LocalComm(), show_progress=False).plan


def rank_plan(plan: Plan, rank: int, ranks: int) -> Plan:
    """The same run's plan on another rank of ``ranks``."""
    return resolve(plan.config, World(rank=rank, size=ranks), LocalComm()).with_sizes(plan.sizes)


def deliver(plan: Plan, ranks: int,
            epochs: int = 2) -> dict[tuple[int, int], tuple[np.ndarray, int]]:
    """(rank, epoch) -> (delivered ids in order, bytes counted)."""
    out = {}
    for rank in range(ranks):
        mine = rank_plan(plan, rank, ranks)
        loader = make_loader(mine)
        try:
            for epoch in range(epochs):
                got = list(loader.epoch(rank_samples(mine.spec, epoch)))
                ids = np.concatenate([b.ids for b in got]) if got else np.empty(0, np.int64)
                out[rank, epoch] = (ids, sum(b.nbytes for b in got))
        finally:
            loader.close()
    return out


@pytest.fixture(params=LOADERS)
def loader_name(request: pytest.FixtureRequest) -> str:
    """Every registered loader; one whose extra is not installed is skipped."""
    name = str(request.param)
    if not installed(name):
        pytest.skip(f"the {name} loader's extra is not installed")
    return name


@pytest.mark.parametrize("sharding", ["sample", "file"])
@pytest.mark.parametrize("ranks", [1, 3])
def test_each_sample_once_per_epoch(tmp_path: Path, loader_name: str, sharding: str,
                                    ranks: int) -> None:
    plan = dataset(tmp_path, f"reader.data_loader={loader_name}",
                   f"reader.sharding={sharding}", "reader.sample_shuffle=seed",
                   "reader.file_shuffle=seed", "reader.drop_last=false")
    got = deliver(plan, ranks)
    for epoch in range(2):
        merged = np.concatenate([got[r, epoch][0] for r in range(ranks)])
        assert np.array_equal(np.sort(merged), np.arange(21)), (epoch, merged)


def test_order_is_the_seeded_plan_and_changes_per_epoch(tmp_path: Path, loader_name: str) -> None:
    plan = dataset(tmp_path, f"reader.data_loader={loader_name}",
                   "reader.sample_shuffle=seed")
    got = deliver(plan, 1)
    for epoch in range(2):
        order = np.concatenate(batches(rank_samples(plan.spec, epoch), 2, True))
        assert np.array_equal(got[0, epoch][0], order)
    assert not np.array_equal(got[0, 0][0], got[0, 1][0])
    again = deliver(plan, 1)
    assert np.array_equal(again[0, 0][0], got[0, 0][0])


def test_drop_last_and_uneven_ranks(tmp_path: Path, loader_name: str) -> None:
    plan = dataset(tmp_path, f"reader.data_loader={loader_name}",
                   "reader.sharding=file")
    got = deliver(plan, 2, epochs=1)
    # 7 files x 3 samples over 2 ranks: 4 and 3 files, 12 and 9 samples; batches of 2
    assert got[0, 0][0].size == 12 and got[1, 0][0].size == 8


def test_bytes_are_counted_at_the_read(tmp_path: Path, loader_name: str) -> None:
    plan = dataset(tmp_path, f"reader.data_loader={loader_name}",
                   "dataset.num_samples_per_file=1")
    got = deliver(plan, 1, epochs=1)
    ids, nbytes = got[0, 0]
    assert ids.size == 6
    assert nbytes == sum(plan.sizes[i] for i in ids)  # one-sample files are read whole


def test_resize_hands_compute_fixed_size_samples(tmp_path: Path, loader_name: str) -> None:
    plan = dataset(tmp_path, f"reader.data_loader={loader_name}",
                   "dataset.record_length_bytes_resize=1000")
    loader = make_loader(plan)
    try:
        batch = next(iter(loader.epoch(rank_samples(plan.spec, 0))))
        assert [np.asarray(s).size for s in batch.data] == [1000, 1000]
    finally:
        loader.close()


def test_a_dropped_batch_is_freed_while_the_loader_waits(tmp_path: Path,
                                                         loader_name: str) -> None:
    """The loop hands a batch to the accelerator and drops it (as ``.to(device)`` does in
    training): nothing in the loader may keep its samples alive until the next batch."""
    plan = dataset(tmp_path, f"reader.data_loader={loader_name}", "reader.prefetch_size=1")
    loader = make_loader(plan)
    try:
        batches = loader.epoch(rank_samples(plan.spec, 0))
        batch = next(batches)
        samples = [weakref.ref(sample) for sample in batch.data]
        assert samples
        del batch
        gc.collect()
        assert [ref() for ref in samples] == [None] * len(samples)
        assert next(batches).samples == 2  # the epoch goes on
        batches.close()
    finally:
        loader.close()


@pytest.mark.slow
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_pytorch_start_methods(tmp_path: Path, context: str) -> None:
    # one worker shows the method works; each worker started imports torch afresh (~1.5 s)
    plan = dataset(tmp_path, "reader.data_loader=pytorch",
                   f"reader.multiprocessing_context={context}", "reader.read_threads=1")
    got = deliver(plan, 1, epochs=1)
    assert got[0, 0][0].size == 20


def test_close_releases_pytorch_workers(tmp_path: Path) -> None:
    import multiprocessing

    plan = dataset(tmp_path, "reader.data_loader=pytorch")
    before = len(multiprocessing.active_children())
    deliver(plan, 1, epochs=2)
    assert len(multiprocessing.active_children()) == before


def test_reading_inline_without_threads(tmp_path: Path, loader_name: str) -> None:
    """``reader.read_threads=0`` reads in the consuming thread (no workers) and delivers."""
    got = deliver(dataset(tmp_path, f"reader.data_loader={loader_name}",
                          "reader.read_threads=0"), 1, epochs=1)
    assert got[0, 0][0].size == 20


def test_loader_instances_are_independent(tmp_path: Path, loader_name: str) -> None:
    """Two loaders alive at once in one process, their epochs interleaved batch by batch,
    each deliver exactly their own plan: no state is shared between instances."""
    plan = dataset(tmp_path, f"reader.data_loader={loader_name}", "reader.sample_shuffle=seed",
                   "reader.drop_last=false")
    other = replace(plan, spec=replace(plan.spec, seed=plan.spec.seed + 1))
    first, second = make_loader(plan), make_loader(other)
    try:
        for epoch in range(2):
            want = [rank_samples(p.spec, epoch) for p in (plan, other)]
            assert not np.array_equal(want[0], want[1])
            streams = [first.epoch(want[0]), second.epoch(want[1])]
            got: list[list[np.ndarray]] = [[], []]
            for a, b in zip(*streams, strict=True):  # one batch of each in turn
                got[0].append(a.ids)
                got[1].append(b.ids)
            for ids, expected in zip(got, want, strict=True):
                assert np.array_equal(np.concatenate(ids), expected)
    finally:
        first.close()
        second.close()


@pytest.mark.slow
@pytest.mark.skipif(not installed("dali"), reason="NVIDIA DALI is not installed")
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_dali_start_methods(tmp_path: Path, context: str) -> None:
    # one worker shows the method works; each worker started imports afresh
    plan = dataset(tmp_path, "reader.data_loader=dali",
                   f"reader.multiprocessing_context={context}", "reader.read_threads=1")
    got = deliver(plan, 1, epochs=1)
    assert got[0, 0][0].size == 20


@pytest.mark.skipif(not installed("dali"), reason="NVIDIA DALI is not installed")
def test_close_releases_dali_workers(tmp_path: Path) -> None:
    import multiprocessing

    plan = dataset(tmp_path, "reader.data_loader=dali")
    before = len(multiprocessing.active_children())
    deliver(plan, 1, epochs=2)
    assert len(multiprocessing.active_children()) == before
