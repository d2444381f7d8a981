"""Generated JPEGs take the requested bytes on disk (COM padding) and still decode."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dliobench.formats.jpeg import COM, SOI, comment_padding
from tests.conftest import tiny_workload

SIZES = [16 * 1024, 64 * 1024, 322_957]  # 16 KiB, 64 KiB, retinanet's record


@pytest.mark.parametrize("size", SIZES)
def test_generated_jpegs_have_the_requested_size(
        size: int, workdir: Path, run_cli: Callable[..., int],
        write_workload: Callable[..., Path], capsys: pytest.CaptureFixture[str]) -> None:
    doc = tiny_workload(dataset={"format": "jpeg", "num_files_train": 6,
                                 "record_length_bytes": size,
                                 "record_length_bytes_stdev": size // 10})
    assert run_cli("generate", str(write_workload(doc)), "--no-progress") == 0
    assert "mean file" in capsys.readouterr().out
    files = sorted((workdir / "data" / "tiny").rglob("*.jpg"))
    assert len(files) == 6
    sizes = np.array([f.stat().st_size for f in files])
    assert abs(sizes.mean() / size - 1) < 0.03
    for f in files:
        with Image.open(f) as image:
            pixels = np.asarray(image)
        assert image.format == "JPEG" and pixels.size > 0


@pytest.mark.parametrize("deficit", [0, 1, 3, 4, 5, 7, 8, 65_537, 65_539, 65_540, 200_000])
def test_comment_padding_is_exact_from_four_bytes(deficit: int) -> None:
    fill = np.arange(1000, dtype=np.uint8)
    pad = comment_padding(deficit, fill)
    assert len(pad) == (deficit if deficit >= 4 else 0)
    pos = 0
    while pos < len(pad):  # a chain of well-formed COM segments
        assert pad[pos:pos + 2] == COM
        pos += 2 + int.from_bytes(pad[pos + 2:pos + 4], "big")
    assert pos == len(pad)


def test_padding_follows_the_start_marker(tmp_path: Path) -> None:
    from dliobench.formats.jpeg import FORMAT

    data = np.random.default_rng(1).integers(0, 256, (1, 40_000), dtype=np.uint8)
    path = tmp_path / "a.jpg"
    FORMAT.write(path, data)
    raw = path.read_bytes()
    assert len(raw) == 40_000 and raw.startswith(SOI + COM) and raw.endswith(b"\xff\xd9")
