"""How many batches a rank's loader may have read before the counted window opened
(``dataset.bounds.batches_ahead``), which the result's ``honesty.readahead_share`` and the
console's short-window note take: tf.data reads ``read_threads`` whole batches at once on
every format but TFRecord (on a capped tier, 12 counted steps an epoch read AU 0.508 where
the tier allows 0.413, and 0.415 with one reader: benchmarks/RESULTS.md, "tf.data on a
capped tier")."""

from __future__ import annotations

import pytest

from dliobench.config.load import load as load_config
from dliobench.dataset.bounds import batches_ahead
from dliobench.results.assemble import honesty


@pytest.mark.parametrize(("loader", "fmt", "ahead"), [
    ("native", "npz", 2), ("pytorch", "npz", 2), ("native", "parquet", 6),
    ("tensorflow", "npz", 6), ("tensorflow", "npy", 6), ("tensorflow", "tfrecord", 2)])
def test_batches_ahead_counts_whole_batches_per_reader(loader: str, fmt: str,
                                                       ahead: int) -> None:
    cfg, _ = load_config(None, [f"reader.data_loader={loader}", f"dataset.format={fmt}",
                             "reader.read_threads=4", "reader.prefetch_size=2"])
    assert batches_ahead(cfg) == ahead


def test_a_tfdata_window_of_20_steps_is_flagged_where_the_native_one_is_not() -> None:
    def flagged(loader: str) -> tuple[float | None, bool]:
        cfg, _ = load_config(None, [f"reader.data_loader={loader}", "dataset.format=npz",
                                 "reader.read_threads=4", "reader.prefetch_size=2"])
        h = honesty(cfg, 10**9, 10**10, True, min_counted_steps=20)
        return h["readahead_share"], h["window_too_short"]

    assert flagged("native") == (pytest.approx(3 / 20), False)
    assert flagged("tensorflow") == (pytest.approx(7 / 20), True)
