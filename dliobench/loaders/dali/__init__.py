"""The DALI loader (a package: the loader, its two feeds and what they share).

DALI is imported only when this package is: a missing extra fails here with an install hint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dliobench.loaders.base import SampleReader, refuse_rows
from dliobench.loaders.dali.loader import DaliLoader

if TYPE_CHECKING:
    from dliobench.dataset.plan import Plan


def build(plan: Plan, reader: SampleReader) -> DaliLoader:
    """The DALI loader as the plan's ``reader`` section configures it."""
    r = plan.config.reader
    refuse_rows(plan.fmt, "dali")
    return DaliLoader(reader, r.batch_size, r.read_threads, r.prefetch_size, r.drop_last,
                      r.multiprocessing_context, native_reader=r.dali_native_reader,
                      spec=plan.spec)


__all__ = ["DaliLoader", "build"]
