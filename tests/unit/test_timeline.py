"""A rank's timeline grouped by epoch in one pass over its steps (result assembly read it
once per epoch: epochs x steps)."""

from __future__ import annotations

import numpy as np

from dliobench.results.timeline import Timeline


def test_every_epochs_columns_come_from_one_pass() -> None:
    tl = Timeline(0)
    for epoch in (0, 1, 2):
        for step in range(4 + epoch):
            tl.record(epoch, step, float(step), 0.1 * epoch, 0.2, 8, 100 * epoch + step)
    grouped = tl.by_epoch()
    assert list(grouped) == tl.epochs() == [0, 1, 2]
    for epoch, cols in grouped.items():
        want = tl.epoch_arrays(epoch)
        assert cols.keys() == want.keys()
        assert all(np.array_equal(cols[k], want[k]) for k in cols)
    assert Timeline(1).by_epoch() == {}
