"""How large a dataset must be for honest numbers (MLPerf Storage's sizing rule).

At least 5x the memory of the participating hosts, so the page cache cannot hold a
meaningful part of it, and at least 500 steps per accelerator per epoch, both rounded up
(mlcommons/storage mlpstorage_py/rules/utils.py ``calculate_training_data_size``,
@2f15ab696e8bf963a6e09d67410ac7d291a0c21d, the v3.0 tool). The batch is the accelerator
profile's (retinanet: 24 on b200, 32 on mi355).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dliobench.config.schema import Config

MEMORY_FACTOR = 5
MIN_STEPS = 500


@dataclass(frozen=True)
class DatasetSize:
    """The files a run needs and which rule decided it."""

    files: int
    files_for_memory: int
    files_for_steps: int
    bytes: int

    @property
    def deciding_rule(self) -> str:
        """Which of the two rules sets the size."""
        return "memory" if self.files_for_memory >= self.files_for_steps else "steps"


def required_files(config: Config, accelerators: int, hosts: int,
                   host_memory_bytes: int) -> DatasetSize:
    """Files needed for ``accelerators`` ranks on ``hosts`` hosts of the given memory each."""
    d = config.dataset
    return files_needed(d.record_length_bytes, d.num_samples_per_file, config.reader.batch_size,
                        accelerators, hosts, host_memory_bytes)


def files_needed(record_length_bytes: int, samples_per_file: int, batch_size: int,
                 accelerators: int, hosts: int, host_memory_bytes: int) -> DatasetSize:
    """The same rule on plain figures (``dliobench check`` applies it to a result's)."""
    per_file = max(1, record_length_bytes * samples_per_file)
    for_memory = math.ceil(MEMORY_FACTOR * hosts * host_memory_bytes / per_file)
    samples = MIN_STEPS * batch_size * accelerators
    for_steps = math.ceil(samples / samples_per_file)
    files = max(for_memory, for_steps)
    return DatasetSize(files, for_memory, for_steps, files * per_file)
