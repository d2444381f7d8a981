"""The registries' names table (``dliobench.config.names``): the schema's choices come from it,
the registries agree with it, and importing the schema stays light."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from dliobench.config.load import FIELDS
from dliobench.config.names import FORMAT_NAMES, LOADER_NAMES, check_registry
from dliobench.formats import REGISTRY as FORMAT_REGISTRY
from dliobench.loaders import REGISTRY as LOADER_REGISTRY


def test_registries_and_schema_agree_with_the_names() -> None:
    assert tuple(FORMAT_REGISTRY) == FORMAT_NAMES
    assert tuple(LOADER_REGISTRY) == LOADER_NAMES
    assert FIELDS["dataset.format"].metadata["choices"] == FORMAT_NAMES
    assert FIELDS["reader.data_loader"].metadata["choices"] == LOADER_NAMES


def test_a_registry_that_drifts_from_its_names_fails_at_import() -> None:
    with pytest.raises(RuntimeError, match=r"differs from dliobench\.config\.names"):
        check_registry("format", FORMAT_NAMES, {**FORMAT_REGISTRY, "zarr": "x.zarr"})
    with pytest.raises(RuntimeError, match="differs"):  # order is part of the names
        check_registry("loader", LOADER_NAMES, dict(reversed(LOADER_REGISTRY.items())))


def test_importing_the_schema_loads_no_registry_storage_or_numpy() -> None:
    """Before the names table, the schema imported both registries: 18 of our modules,
    numpy, crc32c and the C extension."""
    code = ("import sys; import dliobench.config.schema; "
            "print(sorted(m for m in sys.modules if m.startswith('dliobench') or "
            "m.split('.')[0] in ('numpy', 'crc32c')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = ast.literal_eval(out)
    assert "dliobench.config.schema" in loaded
    assert all(m == "dliobench" or m.startswith("dliobench.config.") or m == "dliobench.config"
               for m in loaded), loaded  # no storage, formats, loaders, numpy or crc32c
    assert len(loaded) <= 9, loaded  # the schema and its section modules (vectordb_keys: 9)
