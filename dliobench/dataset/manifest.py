"""The manifest next to a dataset: how it was generated and the real size of every file.

It lets a run check that the data on disk is the data its configuration describes, lets an
interrupted ``generate`` finish only what is missing, and records real byte counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dliobench.config.schema import DatasetConfig
from dliobench.errors import DatasetError
from dliobench.storage.atomic import write_json_atomic

MANIFEST_NAME = "dliobench-manifest.json"
SCHEMA = 1
# The dataset keys that decide the bytes of file i; the file count may differ between runs.
IDENTITY_KEYS = ("format", "num_samples_per_file", "record_length_bytes",
                 "record_length_bytes_stdev", "file_prefix", "generation_seed",
                 "num_subfolders_train", "compressibility", "enable_chunking", "chunk_size",
                 "compression", "compression_level")


def identity(dataset: DatasetConfig) -> dict[str, Any]:
    """The generation parameters a dataset on disk must share with the configuration."""
    return {k: getattr(dataset, k) for k in IDENTITY_KEYS}


@dataclass
class Manifest:
    """Generation parameters and {relative path: size in bytes} of the complete files."""

    params: dict[str, Any]
    files: dict[str, int] = field(default_factory=dict)
    checksums: dict[str, int] = field(default_factory=dict)  # CRC-32C of each file's bytes

    @staticmethod
    def path_for(data_folder: str | Path) -> Path:
        """Where the manifest of a dataset lives."""
        return Path(data_folder) / MANIFEST_NAME

    @classmethod
    def load(cls, data_folder: str | Path) -> Manifest | None:
        """The manifest of a dataset, or None if there is none."""
        path = cls.path_for(data_folder)
        try:
            doc = json.loads(path.read_text())
            return cls(params=doc["params"], files={k: int(v) for k, v in doc["files"].items()},
                       checksums={k: int(v) for k, v in doc.get("checksums", {}).items()})
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise DatasetError(f"the manifest {path} is damaged; delete it and run "
                               "`dliobench generate` to check and complete the dataset") from None

    def save(self, data_folder: str | Path) -> None:
        """Write atomically: a crash leaves the previous manifest or the new one, never half."""
        path = self.path_for(data_folder)
        try:
            write_json_atomic(path, {"schema": SCHEMA, "params": self.params,
                                     "files": self.files, "checksums": self.checksums},
                              indent=0, sort_keys=True)
        except OSError as exc:
            raise DatasetError(f"cannot write the manifest {path}: {exc.strerror}; free space "
                               "and run `dliobench generate` again to complete it") from None

    def record(self, entries: dict[str, tuple[int, int]]) -> None:
        """Enter complete files: {relative path: (size, CRC-32C)}."""
        for rel, (size, crc) in entries.items():
            self.files[rel] = size
            self.checksums[rel] = crc

    def forget(self, rels: list[str]) -> None:
        """Drop files that turned out not to match (they will be written again)."""
        for rel in rels:
            self.files.pop(rel, None)
            self.checksums.pop(rel, None)

    def check_matches(self, dataset: DatasetConfig) -> None:
        """Raise DatasetError when the dataset on disk was generated with other parameters."""
        wanted = identity(dataset)
        diff = [f"{k}={self.params.get(k)!r} (this run: {v!r})"
                for k, v in wanted.items() if self.params.get(k) != v]
        if diff:
            raise DatasetError(
                f"the dataset in {dataset.data_folder} was generated with other parameters: "
                + ", ".join(diff)
                + "; point dataset.data_folder to another folder or delete this one"
            )
