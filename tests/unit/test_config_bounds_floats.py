"""Every fractional key has a ceiling: 1e300 is refused with a sentence at load time, never
left to overflow a clock or a byte count later (train.computation_time=1e300 once ended in a
traceback from time.sleep)."""

from __future__ import annotations

import pytest

from dliobench.base.errors import ConfigError
from dliobench.config.load import _schema, load

FRACTIONAL = sorted(name for name, field in _schema()[0].items()
                    if field.metadata["kind"] in ("float", "seconds"))


@pytest.mark.parametrize("name", FRACTIONAL)
def test_a_huge_fraction_is_refused_when_loading(name: str) -> None:
    with pytest.raises(ConfigError, match="too large"):
        load(None, [f"{name}=1e300"])


def test_there_are_fractional_keys() -> None:
    assert {"train.computation_time", "checkpoint.optimizer_state_factor"} <= set(FRACTIONAL)
