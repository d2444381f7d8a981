"""Datasets with DLIO 2.0's names, folders and file contents, written here (no DLIO needed).

Follows dlio_benchmark 2.0.0 (PyPI) ``data_generator/data_generator.py`` (names
``<data_folder>/{train,valid}/[<subfolder>/]<prefix>_<i>_of_<n>.<format>``, i and the subfolder
padded to the digits of n and of the subfolder count by ``utils/utility.py`` ``add_padding``;
subfolders only when more than one) and ``data_generator/npz_generator.py`` (``np.savez`` of
``x``: uint8 of shape (dim1, dim2, samples), ``y``: the labels), ``jpeg_generator.py`` (a
(dim1, dim2) uint8 image saved by Pillow as JPEG).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def dlio_name(split: str, index: int, files: int, subfolders: int, prefix: str,
              fmt: str) -> str:
    """DLIO's relative path of file ``index`` of a split."""
    name = f"{prefix}_{str(index).rjust(len(str(files)), '0')}_of_{files}.{fmt}"
    if subfolders > 1:
        sub = str(index % subfolders).rjust(len(str(subfolders)), "0")
        return f"{split}/{sub}/{name}"
    return f"{split}/{name}"


def write_dlio_dataset(folder: Path, files: int, dim: int, fmt: str = "npz",
                       subfolders: int = 0, eval_files: int = 0, prefix: str = "img",
                       seed: int = 10) -> list[Path]:
    """Write a DLIO-style dataset of one-sample files (dim x dim bytes each before any
    encoding); return the training files' paths."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for split, count in (("train", files), ("valid", eval_files)):
        (folder / split).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            path = folder / dlio_name(split, i, count, subfolders, prefix, fmt)
            path.parent.mkdir(parents=True, exist_ok=True)
            dims = (dim + i % 3, dim)  # sizes differ between files, as with a stdev
            if fmt == "npz":
                np.savez(path, x=rng.integers(0, 255, (*dims, 1), dtype=np.uint8), y=[0])
            else:
                Image.fromarray(rng.integers(0, 255, dims, dtype=np.uint8)).save(
                    path, format="JPEG" if fmt == "jpeg" else fmt.upper())
            if split == "train":
                out.append(path)
    return out
