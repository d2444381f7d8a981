"""Parquet end to end: scaled-down copies of upstream's DLRM and Flux workloads (DLIO key
names, only sizes changed) generated and trained with native and pytorch; every file written
reads back in pyarrow with the configured columns and row groups."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import last_result

# mlcommons/storage configs/dlio/workload/dlrm_b200.yaml @ 8349485, sizes scaled down
DLRM: dict[str, Any] = {
    "model": {"name": "dlrm"}, "framework": "pytorch",
    "workflow": {"generate_data": True, "train": True, "checkpoint": False},
    "dataset": {"data_folder": "data/dlrm/", "format": "parquet", "num_files_train": 4,
                "num_samples_per_file": 5000, "record_length_bytes": 160,
                "compression": "none",
                "parquet": {"row_group_size": 1024, "read_mode": "row_group", "columns": [
                    {"name": "label", "dtype": "float32", "size": 1},
                    {"name": "numerical_features", "dtype": "float32", "size": 13},
                    {"name": "categorical_features", "dtype": "float32", "size": 26}]}},
    "reader": {"data_loader": "pytorch", "batch_size": 2048, "prefetch_size": 2,
               "read_threads": 2, "file_shuffle": "seed"},
    "train": {"epochs": 1, "computation_time": 0.0005},
    "metric": {"au": 0.70},
}
# flux_b200.yaml @ e3ffed0, sizes scaled down (the columns' sizes too: rows of 2 MB are slow)
FLUX: dict[str, Any] = {
    "model": {"name": "flux"}, "framework": "pytorch",
    "workflow": {"generate_data": True, "train": True, "checkpoint": False},
    "dataset": {"data_folder": "data/flux/", "format": "parquet", "compression": "none",
                "num_files_train": 3, "num_samples_per_file": 16, "record_length": 4 * 1077,
                "parquet": {"columns": [
                    {"name": "t5_encodings", "dtype": "float32", "size": 524},
                    {"name": "clip_encodings", "dtype": "float32", "size": 409},
                    {"name": "mean", "dtype": "float32", "size": 68},
                    {"name": "logvar", "dtype": "float32", "size": 69},
                    {"name": "timestamp", "dtype": "float32", "size": 7}]}},
    "reader": {"data_loader": "pytorch", "batch_size": 8, "read_threads": 2,
               "file_shuffle": "seed"},
    "train": {"epochs": 1, "computation_time": 0.001},
    "metric": {"au": 0.90},
}


def _run(doc: dict[str, Any], loader: str, workdir: Path,
         write_workload: Callable[..., Path], run_cli: Callable[..., int]) -> dict[str, Any]:
    doc = {**doc, "reader": {**doc["reader"], "data_loader": loader}}
    code = run_cli("run", str(write_workload(doc)), "--no-progress")
    assert code == 0
    result = last_result(workdir / "reports")
    assert result["metrics"]["exactly_once"] is True
    assert result["metrics"]["bytes"] > 0
    return result


def _check_files(folder: Path, doc: dict[str, Any]) -> None:
    d = doc["dataset"]
    files = sorted(folder.rglob("*.parquet"))
    assert len(files) == d["num_files_train"]
    names = [c["name"] for c in d["parquet"]["columns"]]
    group = d["parquet"].get("row_group_size")
    for path in files:
        table = pq.read_table(path)
        assert table.column_names == names and table.num_rows == d["num_samples_per_file"]
        meta = pq.ParquetFile(path).metadata
        if group:
            assert meta.row_group(0).num_rows == group


@pytest.mark.parametrize("loader", ["native", "pytorch"])
def test_dlrm_scaled_down(loader: str, workdir: Path, write_workload: Callable[..., Path],
                          run_cli: Callable[..., int]) -> None:
    result = _run(DLRM, loader, workdir, write_workload, run_cli)
    assert result["metrics"]["samples"] > 0
    _check_files(workdir / "data" / "dlrm", DLRM)


def test_flux_scaled_down(workdir: Path, write_workload: Callable[..., Path],
                          run_cli: Callable[..., int]) -> None:
    _run(FLUX, "native", workdir, write_workload, run_cli)
    _check_files(workdir / "data" / "flux", FLUX)


def test_a_batch_holds_the_columns_pyarrow_reads_at_its_rows(tmp_path: Path) -> None:
    """Batches read whole (in order across row groups and files, and shuffled) hand compute
    each column's values of exactly the rows asked for, in that order."""
    import numpy as np

    from dliobench.config.schema import ParquetColumn
    from dliobench.formats._parquet_columns import row_bytes
    from dliobench.formats.base import Stored
    from dliobench.formats.parquet import ParquetFormat
    from dliobench.loaders.base import SampleReader

    columns = (ParquetColumn("label", "int32", 1), ParquetColumn("dense", "uint16", 3),
               ParquetColumn("skipped", "uint8", 5, read=False),
               ParquetColumn("sparse", "int64", 2))
    fmt = ParquetFormat(columns, row_group_size=64)
    rng = np.random.default_rng(7)
    paths = [tmp_path / f"f{i}.parquet" for i in range(3)]
    for path in paths:
        fmt.write(path, rng.integers(0, 256, (200, 31), dtype=np.uint8))
    reader = SampleReader.for_paths(fmt, paths, [p.stat().st_size for p in paths], 200)
    tables = [pq.read_table(p, columns=["label", "dense", "sparse"]).to_pydict() for p in paths]
    for ids in (np.arange(50, 330), rng.permutation(600)[:300], np.array([599, 0, 64])):
        got, nbytes = reader.read_batch(ids)
        assert [c.shape for c in got] == [(ids.size,), (ids.size, 3), (ids.size, 2)]
        assert [c.dtype for c in got] == [np.int32, np.uint16, np.int64]
        for name, values in zip(["label", "dense", "sparse"], got, strict=True):
            want = [tables[i // 200][name][i % 200] for i in ids]
            if isinstance(want[0], bytes):  # a packed column (16 bits): the values' bytes
                want = [np.frombuffer(w, values.dtype).tolist() for w in want]
            assert values.tolist() == want
        assert nbytes > sum(c.nbytes for c in got) // 2  # whole row groups were read
    one, _ = fmt.read_sample(Stored(reader.backend, reader.keys[1]), reader.sizes[1], 200, 5,
                             False)
    assert np.array_equal(one, row_bytes(reader.read_batch(np.array([205]))[0])[0])


def test_columns_with_nulls_or_offsets_come_out_as_pyarrow_converts_them() -> None:
    """Columns are handed over as views of Arrow's buffers (a slice's offset honoured); a
    column with nulls (not ours, another tool's file) as pyarrow's own conversion of it."""
    import numpy as np
    import pyarrow as pa

    from dliobench.formats._parquet_columns import column_arrays

    flat = pa.array(np.arange(40, dtype=np.int16))
    lists = pa.FixedSizeListArray.from_arrays(flat, 4)
    holes = pa.FixedSizeListArray.from_arrays(flat, 4, mask=pa.array([False, True] * 5))
    batch = pa.record_batch([pa.array(np.arange(10.0)), lists, holes,
                             pa.array([1.0, None] * 5)], names=["a", "b", "c", "d"])
    for part in (batch, batch.slice(3, 5)):
        got = column_arrays(part)
        assert [g.shape for g in got] == [(len(part),), (len(part), 4), (len(part), 4),
                                          (len(part),)]
        for g, column in zip(got, part.columns, strict=True):
            rows = column.to_pylist()
            assert [row for row, want in zip(g.tolist(), rows, strict=True)
                    if want is not None] == [want for want in rows if want is not None]
        assert np.isnan(got[3][np.array(part.column(3).is_null())]).all()
        assert got[1].dtype == np.int16 and np.shares_memory(got[1], flat.to_numpy())


def test_a_local_file_pyarrow_reads_itself_counts_what_the_seam_would(tmp_path: Path) -> None:
    """Buffered local files are read by pyarrow's own file and counted by the thread's read
    counters: the same bytes as the backend's counting file object records for the same
    reads (footer once per open file, each row group's column chunks once per read)."""
    import numpy as np

    from dliobench.config.schema import ParquetColumn
    from dliobench.formats import _parquet_open, parquet
    from dliobench.loaders.base import SampleReader
    from dliobench.storage.posix import PosixBackend

    if not _parquet_open.NATIVE_COUNTING:
        pytest.skip("no per-thread read counters (/proc/thread-self/io)")

    class ThroughTheSeam(PosixBackend):
        def local_path(self, key: str) -> None:
            return None

    columns = (ParquetColumn("a", "float32", 3), ParquetColumn("b", "uint8", 20, read=False),
               ParquetColumn("c", "int64", 1))
    paths = [tmp_path / f"f{i}.parquet" for i in range(2)]
    for path in paths:
        parquet.ParquetFormat(columns, 100).write(
            path, np.random.default_rng(1).integers(0, 256, (300, 40), dtype=np.uint8))
    sizes = [p.stat().st_size for p in paths]
    ids = [np.arange(0, 250), np.arange(250, 600), np.array([5, 420, 7]), np.arange(0, 250)]
    counts = []
    for backend in (PosixBackend(str(tmp_path)), ThroughTheSeam(str(tmp_path))):
        fmt = parquet.ParquetFormat(columns, 100)
        reader = SampleReader(fmt, backend, [p.name for p in paths], sizes, 300)
        counts.append([reader.read_batch(batch)[1] for batch in ids])
    native, seam = counts
    assert native == seam and all(n > 0 for n in native)


@pytest.mark.parametrize("loader", ["native", "pytorch"])
def test_dlrm_from_s3(loader: str, workdir: Path, write_workload: Callable[..., Path],
                      run_cli: Callable[..., int], s3_env: Any) -> None:
    """Upstream's DLRM shape generated into and trained from a bucket on moto's server: row
    groups come through the S3 backend's file object, counted; pyarrow reads every object."""
    import io

    bucket = s3_env.bucket(f"dlrm-{loader}")
    doc = {**DLRM, "dataset": {**DLRM["dataset"], "data_folder": f"s3://{bucket}/dlrm",
                               "num_files_train": 2, "num_samples_per_file": 3000}}
    doc["storage"] = {"s3": {"endpoint_url": s3_env.endpoint, "region": "us-east-1",
                             "addressing_style": "path"}}
    result = _run(doc, loader, workdir, write_workload, run_cli)
    delivered = sum(e["delivered"] for r in result["ranks"] for e in r["epochs"])
    assert delivered == 2 * 3000 // 2048 * 2048
    assert result["storage"]["fs_type"] == "s3"
    client = s3_env.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix="dlrm/train/")["Contents"]
    assert len(listed) == 2
    stored = sum(o["Size"] for o in listed)
    # whole row groups of the read columns (all of them here) and each footer, at least once
    m = result["metrics"]
    assert m["bytes"] >= 0.9 * stored * m["samples"] / 6000
    for obj in listed:
        body = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        table = pq.read_table(io.BytesIO(body))
        assert table.num_rows == 3000 and table.column_names == [
            c["name"] for c in DLRM["dataset"]["parquet"]["columns"]]


# 8- and 16-bit integer columns (parquet would widen them to INT32), a float32 one beside them
NARROW: dict[str, Any] = {
    "model": {"name": "narrow"},
    "workflow": {"generate_data": True, "train": True, "checkpoint": False},
    "dataset": {"data_folder": "data/narrow", "format": "parquet", "num_files_train": 4,
                "num_samples_per_file": 96, "record_length_bytes": 4096 + 1 + 2 * 6 + 4 * 3,
                "parquet": {"row_group_size": 32, "columns": [
                    {"name": "image", "dtype": "uint8", "size": 4096},
                    {"name": "flag", "dtype": "int8", "size": 1},
                    {"name": "box", "dtype": "int16", "size": 6},
                    {"name": "scale", "dtype": "float32", "size": 3}]}},
    "reader": {"data_loader": "native", "batch_size": 32, "read_threads": 2,
               "file_shuffle": "seed", "sample_shuffle": "seed"},
    "train": {"epochs": 1, "computation_time": 0.0},
}


@pytest.mark.parametrize("columns", ["narrow", "none"])
def test_a_uint8_dataset_takes_the_bytes_datasize_counts(
        columns: str, workdir: Path, write_workload: Callable[..., Path],
        run_cli: Callable[..., int]) -> None:
    """uint8, int8 and int16 columns (and the default row: one uint8 column) take the bytes
    asked on disk, not 4x: within 5 % of what `dliobench datasize` counts per file and of the
    space check's estimate; every sample is read back exactly once."""
    from dliobench.config.load import load
    from dliobench.dataset.datasize import required_files
    from dliobench.dataset.layout import sample_sizes
    from dliobench.dataset.space import bytes_needed
    from dliobench.formats import format_for

    doc: dict[str, Any] = {**NARROW, "dataset": {**NARROW["dataset"]}}
    if columns == "none":
        del doc["dataset"]["parquet"]
    result = _run(doc, "native", workdir, write_workload, run_cli)
    assert sum(e["delivered"] for r in result["ranks"] for e in r["epochs"]) == 4 * 96
    config, _ = load(write_workload(doc))
    d = config.dataset
    asked = required_files(config, 1, 1, 1 << 30)
    assert asked.bytes // asked.files == d.record_length_bytes * d.num_samples_per_file
    files = sorted((workdir / "data" / "narrow").rglob("*.parquet"))
    on_disk = sum(p.stat().st_size for p in files)
    assert len(files) == 4
    assert abs(on_disk / len(files) / (asked.bytes / asked.files) - 1) < 0.05
    estimate = bytes_needed(format_for(d), d, sample_sizes(d), 1)
    assert abs(on_disk / estimate - 1) < 0.05
    for path in files:  # another parquet reader sees each row's bytes of the uint8 column
        table = pq.read_table(path)
        assert table.num_rows == 96 and table.column(0).type.byte_width == (
            4096 if columns == "narrow" else d.record_length_bytes)


def test_every_dtype_takes_its_bytes_and_reads_back_as_itself(tmp_path: Path) -> None:
    """Each column dtype a workload may name is stored in its own bytes (a few bytes per row
    of list framing at most) and read back as the same values, shape and dtype."""
    import numpy as np

    from dliobench.config.schema import PARQUET_DTYPES, ParquetColumn
    from dliobench.formats.base import stored
    from dliobench.formats.parquet import ParquetFormat

    rows = 64
    for dtype in PARQUET_DTYPES:
        for size in (1, 50):
            column = ParquetColumn("c", dtype, size)
            fmt, path = ParquetFormat((column,), row_group_size=16), tmp_path / f"{dtype}.pq"
            data = np.random.default_rng(3).integers(0, 256, (rows, column.width), np.uint8)
            fmt.write(path, data)
            payload = rows * column.width
            assert path.stat().st_size <= payload * 1.02 + 2048, (dtype, size)
            got, nbytes = fmt.read_rows(stored(path), path.stat().st_size, rows,
                                        np.arange(rows), False)
            want = data.view(dtype).reshape((rows, size) if size > 1 else (rows,))
            assert got[0].dtype == np.dtype(dtype) and got[0].shape == want.shape
            assert np.array_equal(got[0].view(np.uint8), want.view(np.uint8)), dtype
            assert nbytes >= payload
