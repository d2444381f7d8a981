"""DLIO 2.0.0 command lines for the side-by-side benchmarks (one place for both scripts).

DLIO runs from its own venv (``../shared/tools/install-dlio-peer.sh VENV``) under that
venv's Open MPI launcher, with its ``unet3d_a100`` workload and ``++workload.`` overrides.
"""

from __future__ import annotations

from pathlib import Path


def command(venv: str | Path, ranks: int, overrides: dict[str, object],
            *extra: str) -> list[str]:
    """``mpirun -np RANKS dlio_benchmark workload=unet3d_a100 ++workload.KEY=VALUE ...``."""
    bindir = Path(venv) / "bin"
    return [str(bindir / "mpirun"), "--allow-run-as-root", "--oversubscribe", "--bind-to",
            "none", "-np", str(ranks), str(bindir / "dlio_benchmark"), "workload=unet3d_a100",
            *(f"++workload.{key}={value}" for key, value in overrides.items()), *extra]


def npz_dataset(folder: Path, files: int, record_bytes: int) -> dict[str, object]:
    """The overrides of an npz dataset of ``files`` one-sample files of ``record_bytes``."""
    return {"dataset.format": "npz", "dataset.num_samples_per_file": 1,
            "dataset.data_folder": folder, "dataset.num_files_train": files,
            "dataset.record_length": record_bytes, "dataset.record_length_stdev": 0}
