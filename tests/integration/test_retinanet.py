"""RetinaNet (MLPerf Storage v3.0): b200/mi355 profiles, and scaled-down runs with each
loader, with and without JPEG decoding."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dliobench.config.load import load
from dliobench.formats import get_format
from dliobench.loaders.base import SampleReader
from tests.conftest import last_result

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
# one epoch of 12 steps: 11 measured (the floor's AU 0.96 here, as with 2 epochs' 0.97); each
# step emulates 0.05 s of compute, so a second epoch cost 0.6 s a run (x 7 runs)
SMALL = ["dataset.num_files_train=96", "dataset.record_length_bytes=32KiB", "train.epochs=1",
         "reader.read_threads=2", "--no-progress"]


@pytest.mark.parametrize(("accelerator", "compute", "au", "batch"), [
    ("b200", 0.04755, 0.85, 24), ("mi355", 0.0634, 0.85, 32),
    ("h100", 0.180, 0.85, 16), ("a100", 0.210, 0.85, 16)])
def test_retinanet_profiles(accelerator: str, compute: float, au: float, batch: int) -> None:
    cfg, _ = load(WORKLOADS / "retinanet.yaml", accelerator=accelerator)
    assert (cfg.train.computation_time, cfg.metric.au, cfg.reader.batch_size) == \
        (pytest.approx(compute), pytest.approx(au), batch)
    assert (cfg.dataset.format, cfg.dataset.num_files_train) == ("jpeg", 1_170_301)
    assert cfg.dataset.record_length_bytes == 322_957 and cfg.reader.read_threads == 8


def test_retinanet_defaults_to_b200_and_decodes() -> None:
    cfg, _ = load(WORKLOADS / "retinanet.yaml")
    assert cfg.train.accelerator == "b200" and cfg.reader.decode is True


def test_unet3d_b200_is_half_the_h100() -> None:
    b200, _ = load(WORKLOADS / "unet3d.yaml")  # v3.0's b200 is the default
    h100, _ = load(WORKLOADS / "unet3d.yaml", accelerator="h100")
    assert (b200.train.accelerator, h100.train.accelerator) == ("b200", "h100")
    assert h100.train.computation_time == pytest.approx(2 * 0.162, rel=0.01)
    assert b200.train.computation_time == pytest.approx(0.162)
    assert b200.metric.au == pytest.approx(0.90) and b200.reader.batch_size == 7


def test_a_later_batch_size_wins_over_the_profile() -> None:
    cfg, _ = load(WORKLOADS / "retinanet.yaml", ["reader.batch_size=4"], accelerator="mi355")
    assert cfg.reader.batch_size == 4 and cfg.train.computation_time == pytest.approx(0.0634)


@pytest.mark.parametrize(("loader", "decode"), [
    ("native", "false"), ("native", "true"), ("pytorch", "false"), ("pytorch", "true"),
    ("dali", "true"), ("dali-native", "true"), ("dali-native", "false")])
@pytest.mark.serial  # timing: alone, not beside another worker (Makefile)
def test_retinanet_scaled_down_meets_its_floor(loader: str, decode: str, workdir: Path,
                                              run_cli: Callable[..., int]) -> None:
    native = ["reader.dali_native_reader=true"] if loader == "dali-native" else []
    if loader.startswith("dali"):
        pytest.importorskip("nvidia.dali")
        loader = "dali"
    code = run_cli("run", str(WORKLOADS / "retinanet.yaml"), "--accelerator", "b200",
                   f"dataset.data_folder={workdir / 'data'}", f"reader.data_loader={loader}",
                   f"reader.decode={decode}", "reader.batch_size=8",
                   "train.computation_time=0.05", *native, *SMALL)
    assert code == 0
    result = last_result(workdir / "reports")
    metrics = result["metrics"]
    assert metrics["exactly_once"] is True
    assert metrics["samples"] > 0 and metrics["bytes"] > 0
    assert result["config"]["reader"]["decode"] is (decode == "true")
    assert metrics["bytes"] >= metrics["samples"] * 32 * 1024 * 0.97  # whole padded files
    assert result["verdict"]["meets_floor"] is True, result["verdict"]


def test_decode_off_hands_compute_the_encoded_file(tmp_path: Path) -> None:
    fmt = get_format("jpeg")
    path = tmp_path / "a.jpg"
    fmt.write(path, np.random.default_rng(2).integers(0, 256, (1, 20_000), dtype=np.uint8))
    size = path.stat().st_size
    decoded, _ = SampleReader.for_paths(fmt, [path], [size], 1).read(0)
    raw = SampleReader.for_paths(fmt, [path], [size], 1)
    raw.decode = False
    encoded, nbytes = raw.read(0)
    assert decoded.shape == (141, 141) and encoded.tobytes() == path.read_bytes()
    assert nbytes == size == 20_000
