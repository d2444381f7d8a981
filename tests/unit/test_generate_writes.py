"""The generator's writes: O_DIRECT from a reused aligned buffer, buffered where refused.

Whichever path writes a file, its bytes are those the format's own ``write`` produces, and
the manifest's CRC-32C is that of the bytes on disk.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import crc32c
import numpy as np
import pytest

from dliobench.comm.world import LocalComm, World
from dliobench.config.load import load
from dliobench.dataset import file_writer as filegen
from dliobench.dataset import fill as datafill
from dliobench.dataset import writer_pool as writers
from dliobench.dataset.generate import generate
from dliobench.dataset.layout import dataset_files, train_dir
from dliobench.formats import FORMATS, format_for, get_format
from dliobench.run.planning import resolve
from dliobench.storage.buffers import AlignedBuffer
from dliobench.storage.posix import PosixBackend
from tests.conftest import manifest_files


@pytest.mark.parametrize("size", [1, 4095, 4096, 4097, 3 * 4096 + 17])
def test_direct_write_keeps_exact_size_and_bytes(tmp_path: Path, size: int) -> None:
    buffer = AlignedBuffer()
    view = buffer.view(size)
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    view[:size] = payload.tobytes()
    view[size:] = b"\xee" * (len(view) - size)  # padding that must not survive
    writer = PosixBackend(str(tmp_path)).open_write("f", direct=True)
    writer.write(view[:size])
    assert writer.direct
    writer.commit()
    assert (tmp_path / "f").read_bytes() == payload.tobytes()


def test_buffer_is_reused_and_grows(tmp_path: Path) -> None:
    buffer = AlignedBuffer()
    first = buffer.view(10_000)
    assert len(first) == 12288
    first[:3] = b"abc"
    del first
    assert bytes(buffer.view(5000)[:3]) == b"abc"  # same memory, not a fresh map
    assert len(buffer.view(1 << 20)) == 1 << 20
    buffer.close()


def test_refused_o_direct_falls_back_to_buffered(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = os.open

    def refusing_open(path: str, flags: int, mode: int = 0o777) -> int:
        if flags & os.O_DIRECT:  # what a file system without O_DIRECT answers
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refusing_open)
    view = AlignedBuffer().view(5000)
    view[:5000] = b"x" * 5000
    writer = PosixBackend(str(tmp_path)).open_write("f", direct=True)
    writer.write(view[:5000])
    assert not writer.direct
    writer.commit()
    assert (tmp_path / "f").read_bytes() == b"x" * 5000


@pytest.mark.parametrize("odirect", [True, False])
@pytest.mark.parametrize("fmt_name", FORMATS)
def test_generated_files_are_the_formats_own_bytes(tmp_path: Path, fmt_name: str, odirect: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filegen, "DIRECT_MIN_BYTES", 0)  # small files take O_DIRECT too
    fmt = get_format(fmt_name)
    per_file = fmt.max_samples_per_file or 3
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path / 'data'}", f"dataset.format={fmt_name}",
                         "dataset.num_files_train=3", f"dataset.num_samples_per_file={per_file}",
                         "dataset.record_length_bytes=12345", "dataset.generation_seed=9",
                         f"dataset.write_odirect={str(odirect).lower()}"])
    generate(resolve(cfg, World.single(), LocalComm()), World.single(), LocalComm(),
             show_progress=False)
    held = manifest_files(tmp_path / "data")
    root = train_dir(cfg.dataset)
    base = datafill.base_buffer(9)
    (tmp_path / "ref").mkdir()
    for f in dataset_files(cfg.dataset, fmt.extension):
        on_disk = (root / f.relpath).read_bytes()
        assert held[Path(f.relpath).name] == (len(on_disk), crc32c.crc32c(on_disk))
        samples = np.empty((f.num_samples, f.sample_bytes), dtype=np.uint8)
        datafill.fill(samples, base, 9, f.index)
        ref = tmp_path / "ref" / f"{f.index}.{fmt.extension}"
        format_for(cfg.dataset).write(ref, samples)  # configured as generation configures it
        assert on_disk == ref.read_bytes()
        for side, ref_side in zip(fmt.side_files(root / f.relpath), fmt.side_files(ref),
                                  strict=True):
            assert side.read_bytes() == ref_side.read_bytes()
    assert not list(root.rglob(".*tmp*"))


def test_writer_processes_write_the_same_bytes(tmp_path: Path) -> None:
    files = writers.PROCESS_MIN_FILES + 10  # enough small files for writer processes
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path / 'data'}", "dataset.format=npz",
                         f"dataset.num_files_train={files}", "dataset.record_length_bytes=1000",
                         "dataset.record_length_bytes_stdev=300", "dataset.generation_seed=4"])
    generate(resolve(cfg, World.single(), LocalComm()), World.single(), LocalComm(),
             show_progress=False)
    held = manifest_files(tmp_path / "data")
    assert len(held) == files
    root, fmt, base = train_dir(cfg.dataset), get_format("npz"), datafill.base_buffer(4)
    for f in dataset_files(cfg.dataset, fmt.extension):
        on_disk = (root / f.relpath).read_bytes()
        assert held[Path(f.relpath).name][1] == crc32c.crc32c(on_disk)
        if f.index % 100 == 0:
            samples = np.empty((f.num_samples, f.sample_bytes), dtype=np.uint8)
            datafill.fill(samples, base, 4, f.index)
            fmt.write(tmp_path / "ref", samples)
            assert on_disk == (tmp_path / "ref").read_bytes()


def test_parquet_streamed_in_slices_is_the_file_built_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parquet is generated a slice of row groups at a time (``STREAM_BYTES``, made small
    here: 6 slices, the last one short); the file is byte for byte the one pyarrow writes from
    the whole table, and each sample's CRC is recorded in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dliobench.formats import _parquet_write

    monkeypatch.setattr(_parquet_write, "STREAM_BYTES", 64 << 10)
    rows, width = 2000, 160
    cfg, _ = load(None, [f"dataset.data_folder={tmp_path / 'data'}", "dataset.format=parquet",
                         "dataset.num_files_train=1", f"dataset.num_samples_per_file={rows}",
                         f"dataset.record_length_bytes={width}", "dataset.generation_seed=4",
                         "dataset.sample_checksums=true", "dataset.parquet.row_group_size=64",
                         "dataset.parquet.columns=[{name: a, dtype: float32, size: 1}, "
                         "{name: b, dtype: float32, size: 39}]"])
    fmt = format_for(cfg.dataset)
    group = fmt.row_group_size  # type: ignore[attr-defined]
    assert 5 * _parquet_write.slice_rows(group, width, datafill.STAMP_EVERY) < rows
    generate(resolve(cfg, World.single(), LocalComm()), World.single(), LocalComm(),
             show_progress=False)
    f = next(iter(dataset_files(cfg.dataset, fmt.extension)))
    on_disk = (train_dir(cfg.dataset) / f.relpath).read_bytes()
    samples = np.empty((rows, width), dtype=np.uint8)
    datafill.fill(samples, datafill.base_buffer(4), 4, f.index)
    table = pa.table({"a": samples[:, :4].copy().view(np.float32).reshape(-1),
                      "b": pa.FixedSizeListArray.from_arrays(
                          samples[:, 4:].copy().view(np.float32).reshape(-1), 39)})
    reference = pa.BufferOutputStream()
    pq.write_table(table, reference, row_group_size=64, compression="none",
                   write_statistics=False, use_dictionary=False)
    assert on_disk == reference.getvalue().to_pybytes()
    assert manifest_files(tmp_path / "data")[Path(f.relpath).name] == (
        len(on_disk), crc32c.crc32c(on_disk))
