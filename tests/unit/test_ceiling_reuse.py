"""A cached client ceiling is reused only for the settings and host load it was measured under."""

from __future__ import annotations

import os
from dataclasses import replace

from dliobench.comm.world import World
from dliobench.config.load import load
from dliobench.run import ceiling


def test_a_cached_ceiling_under_other_settings_or_load_is_not_reused() -> None:
    config, _ = load(None, ["reader.read_threads=2"])
    world = World.single()
    now = ceiling.host_load(0.05)
    assert now is not None and now["cores"] == len(os.sched_getaffinity(0))
    assert 0 <= now["busy_cores"] <= now["cores"]
    ceiling._remember(config, world, 500.0, {"load": now})
    assert ceiling.cached(config, world, load=now) == 500.0
    busier = {**now, "busy_cores": now["busy_cores"] + 1.0}
    assert ceiling.cached(config, world, load=busier) is None
    assert ceiling.cached(config, world, load={**now, "cores": now["cores"] + 4}) is None
    other = replace(config, reader=replace(config.reader, read_threads=4))
    assert ceiling.cached(other, world, load=now) is None
    decoded = replace(config, reader=replace(config.reader, verify_samples=True))
    assert ceiling.cached(decoded, world, load=now) is None
    ceiling._remember(config, world, 500.0, {})  # measured before loads were recorded
    assert ceiling.cached(config, world, load=now) is None
