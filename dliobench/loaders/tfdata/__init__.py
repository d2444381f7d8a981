"""The tf.data loader (``reader.data_loader: tensorflow``), a package: TensorFlow's quiet
import, the epoch's sources, and the loader.

TensorFlow is imported only when this package is: a missing extra fails here with an install
hint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dliobench.loaders.base import SampleReader, refuse_rows
from dliobench.loaders.tfdata.loader import TFDataLoader

if TYPE_CHECKING:
    from dliobench.dataset.plan import Plan


def build(plan: Plan, reader: SampleReader) -> TFDataLoader:
    """The tf.data loader as the plan's ``reader`` section configures it."""
    r = plan.config.reader
    refuse_rows(plan.fmt, "tensorflow")
    d = plan.config.dataset
    same_size = d.record_length_bytes_stdev == 0 and not plan.fmt.compressed_image
    return TFDataLoader(reader, plan.spec, r.batch_size, r.read_threads, r.prefetch_size,
                        r.drop_last, same_size)


__all__ = ["TFDataLoader", "build"]
