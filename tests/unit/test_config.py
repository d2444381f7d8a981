"""Config parsing: both DLIO spellings, overrides, accelerator profiles, and clear errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.base.errors import ConfigError
from dliobench.config.load import load

# Our own fixtures, written in the key names of DLIO 2.0.0 (PyPI) and of DLIO's main branch.
DLIO_2_0_0 = {
    "model": "unet3d",
    "framework": "pytorch",
    "workflow": {"generate_data": False, "train": True, "checkpoint": True},
    "dataset": {"data_folder": "data/unet3d/", "format": "npz", "num_files_train": 168,
                "num_samples_per_file": 1, "record_length": 146600628.0,
                "record_length_stdev": 68341808, "record_length_resize": 2097152},
    "reader": {"data_loader": "tensorflow", "batch_size": 7, "read_threads": 4,
               "file_shuffle": "seed", "sample_shuffle": "seed", "computation_threads": 2},
    "train": {"epochs": 5, "computation_time": 0.323},
    "checkpoint": {"checkpoint_folder": "ckpt/unet3d", "checkpoint_after_epoch": 5,
                   "epochs_between_checkpoints": 2, "model_size": 499153191},
    "profiling": {"profiler": "iostat"},
}
DLIO_MAIN = {
    "model": {"name": "unet3d", "type": "cnn", "model_size_bytes": 499153191},
    "framework": "pytorch",
    "workflow": {"generate_data": False, "train": True},
    "dataset": {"data_folder": "data/unet3d/", "format": "npz", "num_files_train": 168,
                "record_length_bytes": 146600628, "record_length_bytes_stdev": 68341808,
                "record_length_bytes_resize": 2097152},
    "reader": {"data_loader": "tensorflow", "batch_size": 7, "read_threads": 4,
               "file_shuffle": "seed", "sample_shuffle": "seed"},
    "train": {"epochs": 5, "computation_time": {"mean": 0.323, "stdev": 0.01}},
    "metric": {"au": 0.9},
    "output": {"metric": {"exclude_start_steps": 2, "exclude_end_steps": 1}},
}


def test_defaults_without_a_file() -> None:
    cfg, warnings = load(None)
    assert cfg.dataset.format == "npz"
    assert cfg.reader.data_loader == "native"
    assert cfg.metric.exclude_start_steps == 1
    assert warnings == []


def test_dlio_2_0_0_spelling(write_workload: Callable[..., Path]) -> None:
    cfg, warnings = load(write_workload(DLIO_2_0_0))
    assert cfg.model.name == "unet3d"
    assert cfg.model.model_size_bytes == 499153191
    assert cfg.dataset.record_length_bytes == 146600628
    assert cfg.dataset.record_length_bytes_stdev == 68341808
    assert cfg.dataset.record_length_bytes_resize == 2097152
    assert cfg.reader.data_loader == "tensorflow"  # a real tf.data pipeline, not a substitute
    assert cfg.reader.file_shuffle == "seed"
    assert cfg.train.computation_time == pytest.approx(0.323)
    assert not any("runs with dliobench's" in w for w in warnings)
    unsupported = [w for w in warnings if "does not implement" in w]
    assert len(unsupported) == 1
    assert "profiling.profiler" in unsupported[0]
    assert "reader.computation_threads" in unsupported[0]
    assert cfg.workflow.checkpoint is True
    assert cfg.checkpoint.checkpoint_folder == "ckpt/unet3d"
    assert (cfg.checkpoint.checkpoint_after_epoch, cfg.checkpoint.epochs_between_checkpoints) \
        == (5, 2)


def test_dlio_main_spelling(write_workload: Callable[..., Path]) -> None:
    cfg, warnings = load(write_workload(DLIO_MAIN))
    assert cfg.model.model_size_bytes == 499153191
    assert cfg.dataset.record_length_bytes_resize == 2097152
    assert cfg.train.computation_time == pytest.approx(0.323)
    assert cfg.train.computation_time_stdev == pytest.approx(0.01)
    assert cfg.metric.exclude_start_steps == 2
    assert cfg.metric.exclude_end_steps == 1
    assert cfg.model.type == "cnn"  # implemented with the checkpoint layouts: no warning
    assert not any("model.type" in w for w in warnings)


def test_overrides_with_dlio_prefixes(write_workload: Callable[..., Path]) -> None:
    path = write_workload(DLIO_MAIN)
    cfg, _ = load(path, ["++workload.dataset.num_files_train=16", "workload.train.epochs=2",
                         "reader.batch_size=3", "dataset.record_length=64KiB"])
    assert cfg.dataset.num_files_train == 16
    assert cfg.train.epochs == 2
    assert cfg.reader.batch_size == 3
    assert cfg.dataset.record_length_bytes == 65536


def test_shuffle_booleans_and_yaml_off() -> None:
    cfg, _ = load(None, ["reader.file_shuffle=off", "reader.sample_shuffle=true"])
    assert cfg.reader.file_shuffle == "off"
    assert cfg.reader.sample_shuffle == "seed"


@pytest.mark.parametrize(("override", "needle"), [
    ("dataset.num_file_train=4", "did you mean 'dataset.num_files_train'"),
    ("reader.epochs=4", "did you mean 'train.epochs'"),
    ("dataset.num_files_train=abc", "dataset.num_files_train"),
    ("dataset.record_length_bytes=-5", "at least 1"),
    ("reader.batch_size=0", "reader.batch_size"),
    ("reader.data_loader=foo", "one of native, pytorch, dali"),
    ("reader.prefetch_size=autotune", "needs reader.data_loader: tensorflow"),
    ("metric.au=1.5", "at most 1"),
    ("train.computation_time=-1", "train.computation_time"),
    ("train.total_training_steps=0", "total_training_steps"),
    ("nonsense", "section.key=value"),
    ("bogus.key=1", "unknown key 'bogus.key'"),
])
def test_bad_input_is_one_clear_config_error(override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(None, [override])
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_key_in_file_names_file(write_workload: Callable[..., Path]) -> None:
    path = write_workload({"dataset": {"num_fils_train": 3}})
    with pytest.raises(ConfigError, match=r"unknown key 'dataset.num_fils_train' in .*tiny.yaml"):
        load(path)


def test_missing_and_malformed_files(workdir: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load(workdir / "nope.yaml")
    bad = workdir / "bad.yaml"
    bad.write_text("dataset: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load(bad)


ACCEL = {"accelerators": {"h100": {"computation_time": 0.323, "au": 0.9},
                          "a100": {"computation_time": 0.636, "au": 0.8}},
         "train": {"accelerator": "h100"}}


def test_accelerator_profile_selection(write_workload: Callable[..., Path]) -> None:
    path = write_workload(ACCEL)
    cfg, _ = load(path)
    assert cfg.train.computation_time == pytest.approx(0.323)
    cfg, _ = load(path, accelerator="a100")
    assert cfg.train.computation_time == pytest.approx(0.636)
    assert cfg.metric.au == pytest.approx(0.8)
    cfg, _ = load(path, ["train.computation_time=0.1"], accelerator="a100")
    assert cfg.train.computation_time == pytest.approx(0.1)


def test_missing_accelerator_lists_the_available(write_workload: Callable[..., Path]) -> None:
    with pytest.raises(ConfigError, match="no 'v100' profile; it has: a100, h100"):
        load(write_workload(ACCEL), accelerator="v100")


def test_unsupported_distribution_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"train\.computation_time"):
        load(None, ["train.computation_time={type: gamma, shape: 2}"])


def test_a_stdev_left_larger_than_half_the_mean_is_warned_about() -> None:
    workload = Path(__file__).resolve().parents[2] / "workloads" / "unet3d.yaml"
    _, warnings = load(workload, ["dataset.record_length_bytes=2MiB"])
    assert any("more than half of dataset.record_length_bytes" in w for w in warnings)
    _, quiet = load(workload, ["dataset.record_length_bytes=2MiB",
                               "dataset.record_length_bytes_stdev=100KiB"])
    assert not any("more than half" in w for w in quiet)


def test_checkpoints_asked_for_after_the_last_epoch_are_warned_about() -> None:
    """Upstream's unet3d_b200.yaml checkpoints after epoch 5: fewer epochs write none."""
    upstream = (Path(__file__).resolve().parents[2] / "dliobench" / "report" / "rules"
                / "upstream"
                / "unet3d_b200.yaml")
    asked = ["workflow.checkpoint=true", "train.epochs=2"]
    _, warnings = load(upstream, asked)
    assert any("no checkpoint will be written" in w for w in warnings)
    _, quiet = load(upstream, [*asked, "checkpoint.checkpoint_after_epoch=2"])
    assert not any("no checkpoint will be written" in w for w in quiet)


def test_keys_give_units_and_the_accelerators_section(
        capsys: pytest.CaptureFixture[str]) -> None:
    from dliobench.cli.main import main

    assert main(["keys"]) == 0
    out = capsys.readouterr().out
    assert "train.computation_time = 0.0 [seconds" in out
    assert "storage.lustre_stripe_size = 0 [bytes" in out
    assert "dataset.chunk_size = 0 [bytes" in out
    assert "accelerators.<name> = {computation_time: S, au: F" in out


def test_overrides_may_follow_options_on_every_workload_command(
        capsys: pytest.CaptureFixture[str]) -> None:
    from dliobench.cli.main import main

    assert main(["show-config", "unet3d", "--accelerator", "a100", "train.epochs=3"]) == 0
    out = capsys.readouterr().out
    assert "epochs: 3" in out and "accelerator: a100" in out
