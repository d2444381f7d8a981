"""Every format trains end to end through the native loader, with and without O_DIRECT."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.base.errors import ConfigError
from dliobench.config.load import load
from dliobench.formats import FORMATS, format_for, get_format
from tests.conftest import last_result, tiny_workload


@pytest.mark.parametrize("odirect", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_format_trains(fmt: str, odirect: bool, workdir: Path,
                       write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> None:
    per_file = 1 if get_format(fmt).max_samples_per_file == 1 else 3
    doc = tiny_workload(dataset={"format": fmt, "num_samples_per_file": per_file,
                                 "record_length_bytes": 20000},
                        reader={"odirect": odirect, "sample_shuffle": "seed"})
    assert run_cli("run", str(write_workload(doc)), "--no-progress") == 0
    m = last_result(workdir / "reports")["metrics"]
    assert m["exactly_once"] is True
    assert m["bytes"] >= m["samples"] * 20000 * (0.5 if fmt == "jpeg" else 0.95)


def test_hdf5_chunking_and_compression_from_dlio_keys(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> None:
    doc = tiny_workload(dataset={"format": "hdf5", "num_samples_per_file": 4,
                                 "enable_chunking": True, "chunk_size": 4096,
                                 "compression": "gzip", "compression_level": 1,
                                 "compressibility": 0.5})
    assert run_cli("run", str(write_workload(doc)), "--no-progress") == 0
    result = last_result(workdir / "reports")
    assert result["metrics"]["exactly_once"] is True
    # half-zero data compresses: fewer bytes on disk and read than the payload
    assert result["honesty"]["dataset_bytes"] < 8 * 4 * 65536 * 0.8


def test_compression_is_for_hdf5_and_parquet_only() -> None:
    cfg, _ = load(None, ["dataset.compression=gzip"])
    with pytest.raises(ConfigError, match="hdf5 and parquet formats only"):
        format_for(cfg.dataset)
