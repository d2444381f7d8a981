"""LoaderContract: the suite every loader passes (add a loader to LOADERS: it is tested).

Across R simulated ranks (one loader per rank in this process) each sample is delivered
exactly once per epoch (drop_last aside); orders follow the seeded plan; bytes are counted at
the read call, in worker processes too; close() releases the workers.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dliobench.config import load
from dliobench.config_schema import Config
from dliobench.generate import generate
from dliobench.layout import dataset_files
from dliobench.loaders import make_loader
from dliobench.manifest import Manifest
from dliobench.runner import shard_spec
from dliobench.sharding import batches, rank_samples
from dliobench.world import LocalComm, World

LOADERS = ["native", "pytorch"]
if importlib.util.find_spec("nvidia.dali") is not None:
    LOADERS.append("dali")


def dataset(tmp_path: Path, *overrides: str) -> tuple[Config, list, list[int]]:  # type: ignore[type-arg]
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path / 'data'}", "dataset.num_files_train=7",
                         "dataset.num_samples_per_file=3", "dataset.record_length_bytes=4096",
                         "reader.batch_size=2", "reader.read_threads=2", *overrides])
    generate(cfg, World.single(), LocalComm(), show_progress=False)
    manifest = Manifest.load(cfg.dataset.data_folder)
    assert manifest is not None
    files = dataset_files(cfg.dataset, "npz")
    return cfg, files, [manifest.files[f.relpath] for f in files]


def deliver(cfg: Config, files: list, sizes: list[int], ranks: int,  # type: ignore[type-arg]
            epochs: int = 2) -> dict[tuple[int, int], tuple[np.ndarray, int]]:
    """(rank, epoch) -> (delivered ids in order, bytes counted)."""
    out = {}
    for rank in range(ranks):
        world = World(rank=rank, size=ranks)
        spec = shard_spec(cfg, world, cfg.train.seed)
        loader = make_loader(cfg, files, sizes)
        try:
            for epoch in range(epochs):
                got = list(loader.epoch(rank_samples(spec, epoch)))
                ids = np.concatenate([b.ids for b in got]) if got else np.empty(0, np.int64)
                out[rank, epoch] = (ids, sum(b.nbytes for b in got))
        finally:
            loader.close()
    return out


@pytest.fixture(params=LOADERS)
def loader_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("sharding", ["sample", "file"])
@pytest.mark.parametrize("ranks", [1, 3])
def test_each_sample_once_per_epoch(tmp_path: Path, loader_name: str, sharding: str,
                                    ranks: int) -> None:
    cfg, files, sizes = dataset(tmp_path, f"reader.data_loader={loader_name}",
                                f"reader.sharding={sharding}", "reader.sample_shuffle=seed",
                                "reader.file_shuffle=seed", "reader.drop_last=false")
    got = deliver(cfg, files, sizes, ranks)
    for epoch in range(2):
        merged = np.concatenate([got[r, epoch][0] for r in range(ranks)])
        assert np.array_equal(np.sort(merged), np.arange(21)), (epoch, merged)


def test_order_is_the_seeded_plan_and_changes_per_epoch(tmp_path: Path, loader_name: str) -> None:
    cfg, files, sizes = dataset(tmp_path, f"reader.data_loader={loader_name}",
                                "reader.sample_shuffle=seed")
    got = deliver(cfg, files, sizes, 1)
    spec = shard_spec(cfg, World.single(), cfg.train.seed)
    for epoch in range(2):
        plan = np.concatenate(batches(rank_samples(spec, epoch), 2, True))
        assert np.array_equal(got[0, epoch][0], plan)
    assert not np.array_equal(got[0, 0][0], got[0, 1][0])
    again = deliver(cfg, files, sizes, 1)
    assert np.array_equal(again[0, 0][0], got[0, 0][0])


def test_drop_last_and_uneven_ranks(tmp_path: Path, loader_name: str) -> None:
    cfg, files, sizes = dataset(tmp_path, f"reader.data_loader={loader_name}",
                                "reader.sharding=file")
    got = deliver(cfg, files, sizes, 2, epochs=1)
    # 7 files x 3 samples over 2 ranks: 4 and 3 files, 12 and 9 samples; batches of 2
    assert got[0, 0][0].size == 12 and got[1, 0][0].size == 8


def test_bytes_are_counted_at_the_read(tmp_path: Path, loader_name: str) -> None:
    cfg, files, sizes = dataset(tmp_path, f"reader.data_loader={loader_name}",
                                "dataset.num_samples_per_file=1")
    got = deliver(cfg, files, sizes, 1, epochs=1)
    ids, nbytes = got[0, 0]
    assert ids.size == 6
    assert nbytes == sum(sizes[i] for i in ids)  # one-sample files are read whole


def test_resize_hands_compute_fixed_size_samples(tmp_path: Path, loader_name: str) -> None:
    cfg, files, sizes = dataset(tmp_path, f"reader.data_loader={loader_name}",
                                "dataset.record_length_bytes_resize=1000")
    loader = make_loader(cfg, files, sizes)
    try:
        spec = shard_spec(cfg, World.single(), cfg.train.seed)
        batch = next(iter(loader.epoch(rank_samples(spec, 0))))
        assert [np.asarray(s).size for s in batch.data] == [1000, 1000]
    finally:
        loader.close()


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_pytorch_start_methods(tmp_path: Path, context: str) -> None:
    cfg, files, sizes = dataset(tmp_path, "reader.data_loader=pytorch",
                                f"reader.multiprocessing_context={context}")
    got = deliver(cfg, files, sizes, 1, epochs=1)
    assert got[0, 0][0].size == 20


def test_close_releases_pytorch_workers(tmp_path: Path) -> None:
    import multiprocessing

    cfg, files, sizes = dataset(tmp_path, "reader.data_loader=pytorch")
    before = len(multiprocessing.active_children())
    deliver(cfg, files, sizes, 1, epochs=2)
    assert len(multiprocessing.active_children()) == before


def test_loader_instances_are_independent(tmp_path: Path) -> None:
    cfg, files, sizes = dataset(tmp_path)
    cfg = replace(cfg, reader=replace(cfg.reader, read_threads=0))
    got = deliver(cfg, files, sizes, 1, epochs=1)
    assert got[0, 0][0].size == 20


@pytest.mark.skipif("dali" not in LOADERS, reason="NVIDIA DALI is not installed")
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_dali_start_methods(tmp_path: Path, context: str) -> None:
    cfg, files, sizes = dataset(tmp_path, "reader.data_loader=dali",
                                f"reader.multiprocessing_context={context}")
    got = deliver(cfg, files, sizes, 1, epochs=1)
    assert got[0, 0][0].size == 20


@pytest.mark.skipif("dali" not in LOADERS, reason="NVIDIA DALI is not installed")
def test_close_releases_dali_workers(tmp_path: Path) -> None:
    import multiprocessing

    cfg, files, sizes = dataset(tmp_path, "reader.data_loader=dali")
    before = len(multiprocessing.active_children())
    deliver(cfg, files, sizes, 1, epochs=2)
    assert len(multiprocessing.active_children()) == before
