"""The upstream files `dliobench check` judges against: kept byte for byte, loaded as any
workload file, and the accelerator a run emulated inferred from them when it names none."""

from __future__ import annotations

import hashlib

import pytest

from dliobench.report.accelerator import which
from dliobench.report.rules import references
from dliobench.report.rules.division import SUBMITTABLE
from dliobench.report.rules.finding import DOCUMENTS
from dliobench.report.rules.references import reference

# sha256 of each copy as read from mlcommons/storage at the cited commit (776, 443 and 442
# characters): an edit to a copy fails here.
COPIES = {
    "unet3d_b200.yaml": "46d718e57d454fd781ff3dc71c535d7deb9530baf243b2305460421370d159bb",
    "retinanet_b200.yaml": "38de80cf1aa9700a1c47b358087890e408b1e52b5ce15d79127bd78d88c6f723",
    "retinanet_mi355.yaml": "ced2afa84d57de1d293d1415cb984b637d93dc0b679b8a5ed6a8449cec1b722a",
}


@pytest.mark.parametrize("ref", references.REFERENCES, ids=lambda r: r.name)
def test_each_copy_is_the_cited_file_unedited(ref: references.Reference) -> None:
    assert hashlib.sha256(ref.path.read_bytes()).hexdigest() == COPIES[ref.name]
    assert ref.accelerator in SUBMITTABLE[ref.workload]  # editions.yaml 3.0 CLOSED training
    assert DOCUMENTS[ref.name] == (f"mlcommons/storage configs/dlio/workload/{ref.name}"
                                   f"@{ref.commit}")


def test_the_copies_load_in_dliobench_key_names() -> None:
    unet3d = reference("unet3d", "b200")
    assert unet3d is not None
    assert (unet3d["model.name"], unet3d["model.model_size_bytes"]) == ("unet3d", 499153191)
    assert (unet3d["reader.data_loader"], unet3d["train.computation_time"]) == ("pytorch", 0.162)
    assert unet3d["checkpoint.checkpoint_after_epoch"] == 5 and unet3d["train.accelerator"] == ""
    mi355 = reference("retinanet", "mi355")
    assert mi355 is not None and mi355["reader.batch_size"] == 32
    assert reference("unet3d", "mi355") is None  # upstream has no unet3d_mi355.yaml
    assert reference("unet3d", "h100") is None  # not a v3.0 file


@pytest.mark.parametrize(("workload", "train", "name", "how"), [
    ("unet3d", {"computation_time": 0.162}, "b200",
     "inferred: train.computation_time = 0.162 s is unet3d_b200.yaml's"),
    ("retinanet", {"computation_time": 0.0634}, "mi355",
     "inferred: train.computation_time = 0.0634 s is retinanet_mi355.yaml's"),
    ("retinanet", {"accelerator": "h100", "computation_time": 0.18}, "h100",
     "named by train.accelerator"),
    ("unet3d", {"computation_time": 0.02}, "",
     "not named (train.accelerator is empty) and train.computation_time = 0.02 s is no v3.0 "
     "unet3d file's (b200 0.162 s)"),
    ("flux", {"computation_time": 1.8}, "",
     "not named (train.accelerator is empty) and train.computation_time = 1.8 s is no v3.0 "
     "flux file's (none)"),
])
def test_the_accelerator_is_named_or_inferred(workload: str, train: dict[str, object],
                                              name: str, how: str) -> None:
    found = which(workload, {"train": train})
    assert (found.name, found.how) == (name, how)


def test_a_label_and_a_finding_name_one_accelerator() -> None:
    """A run that names b200 but times its batches as no profile does: the check judges the
    b200 it named, the table says ``custom (b200 named)``, as the console says custom; a
    run with a profile's figures is that profile in both."""
    profiles = {"b200": {"computation_time": 0.162, "batch_size": None}}
    own = which("unet3d", {"train": {"accelerator": "b200", "computation_time": 0.02},
                           "accelerators": profiles})
    assert (own.name, own.own_figures, own.label) == ("b200", False, "custom (b200 named)")
    assert "not its profile's" in own.how
    same = which("unet3d", {"train": {"accelerator": "", "computation_time": 0.162},
                            "accelerators": profiles})
    assert (same.name, same.label) == ("b200", "b200")
