"""S3 settings from the configuration: our keys, DLIO main's spellings, URLs checked at load,
credentials redacted wherever a configuration or command line is shown."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.base.errors import ConfigError
from dliobench.config.load import load
from dliobench.config.secrets import REDACTED, redact_argv
from dliobench.results.files import config_dict
from dliobench.storage import backend_for
from dliobench.storage.s3client import S3Settings


def test_dlio_main_storage_options_set_the_s3_keys(write_workload: Callable[..., Path]) -> None:
    path = write_workload({"dataset": {"data_folder": "unet3d/data"},
                           "storage": {"storage_type": "s3", "storage_root": "training",
                                       "storage_options": {
                                           "endpoint_url": "http://10.0.0.1:9000",
                                           "access_key_id": "AKID", "secret_access_key": "SK",
                                           "region": "eu-west-1", "s3_force_path_style": True,
                                           "s3_max_attempts": 3}}})
    config, _ = load(path)
    s = config.storage
    assert config.dataset.data_folder == "s3://training/unet3d/data"
    assert (s.s3_endpoint_url, s.s3_region, s.s3_addressing_style, s.s3_max_attempts) == \
        ("http://10.0.0.1:9000", "eu-west-1", "path", 3)
    settings = S3Settings.from_config(s)
    assert (settings.access_key_id, settings.secret_access_key) == ("AKID", "SK")
    assert "SK" not in repr(settings) and "AKID" not in repr(settings)
    shown = config_dict(config)["storage"]
    assert shown["s3_secret_access_key"] == shown["s3_access_key_id"] == REDACTED
    assert shown["s3_endpoint_url"] == "http://10.0.0.1:9000"  # only credentials are hidden
    backend = backend_for(config.dataset.data_folder, s)
    assert backend.describe("train/a.npz") == "s3://training/unet3d/data/train/a.npz"
    assert backend.local_path("train/a.npz") is None and backend.facts()["fs_type"] == "s3"


def test_an_s3_url_implies_the_storage_type_and_is_normalised() -> None:
    config, _ = load(None, ["dataset.data_folder=s3://bucket-1//a//b/"])
    assert config.dataset.data_folder == "s3://bucket-1/a/b"
    assert config.storage.storage_type == "s3"
    assert load(None, ["dataset.data_folder=rel", "storage.storage_root=/x"])[0] \
        .dataset.data_folder == "/x/rel"  # POSIX roots join as before


@pytest.mark.parametrize("override, needle", [
    ("dataset.data_folder=s3://", "does not name an S3 bucket"),
    ("dataset.data_folder=s3://Upper_Case/x", "does not name an S3 bucket"),
    ("checkpoint.checkpoint_folder=s3://ab", "checkpoint.checkpoint_folder: 's3://ab'"),
    ("storage.storage_type=s3", "needs the bucket: set storage.storage_root=BUCKET"),
    ("storage.s3.part_size=1MiB", "it must be at least 5242880"),
    ("storage.s3.secret_access_key={a: 1}", "must be a string (its value is not shown)"),
])
def test_bad_s3_settings_are_one_sentence(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(None, [override])
    assert needle in str(caught.value)


def test_secret_overrides_are_redacted_on_the_command_line() -> None:
    argv = ["dliobench", "run", "storage.s3.secret_access_key=SK",
            "++workload.storage.storage_options.access_key_id=AKID", "train.epochs=2"]
    assert redact_argv(argv) == [
        "dliobench", "run", f"storage.s3.secret_access_key={REDACTED}",
        f"++workload.storage.storage_options.access_key_id={REDACTED}", "train.epochs=2"]
