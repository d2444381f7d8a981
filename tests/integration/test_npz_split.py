"""How an existing npz dataset is cut into samples: said by every run, DLIO's ``x[..., i]``
unless the npz keys say otherwise, a command-line ``dataset.num_samples_per_file`` honoured
or refused in one sentence, and an index trusted only by runs asking for its split."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import last_result
from tests.dlio_written import write_dlio_dataset
from tests.integration.test_existing_datasets import no_listing

QUICK = ["train.epochs=1", "train.computation_time=0", "reader.batch_size=2",
         "reader.read_threads=1", "reader.data_loader=native", "--no-progress"]


def _run(run_cli: Callable[..., int], out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """Exit code and (when it ran) the dataset section of the result, each run in its own
    output folder."""
    code = run_cli("run", "--output", str(out), *QUICK, *args)
    if code:
        return code, {}
    result = last_result(out)
    assert result["metrics"]["exactly_once"] is True
    return code, result["config"]["dataset"]


def _split(d: dict[str, Any]) -> tuple[Any, ...]:
    return (d.get("npz_member"), d.get("npz_sample_axis"), d["num_samples_per_file"],
            d["record_length_bytes"], d["num_files_train"])


def test_a_two_member_npz_folder_is_split_as_said(workdir: Path, run_cli: Callable[..., int],
                                                  capsys: pytest.CaptureFixture[str],
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", "dliobench")
    own = workdir / "own"
    own.mkdir()
    rng = np.random.default_rng(3)
    for i in range(3):  # numpy's own writer; 4 samples interleaved along x's last axis
        np.savez(own / f"vol{i}.npz", x=rng.integers(0, 255, (8, 8, 8, 4), dtype=np.uint8),
                 y=np.arange(4))
    # DLIO's split, x[..., i], cannot be read as byte ranges: refused, naming the ways out
    assert _run(run_cli, workdir / "r0", "--dataset", str(own))[0] == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 4 samples along axis -1 of its member of shape " \
        "(8, 8, 8, 4), interleaved" in err[0] and "dataset.npz_sample_axis=0 (8 samples of " \
        "256 B)" in err[0] and "dataset.num_samples_per_file=1 (the member whole, 2,048 B)" \
        in err[0], err

    code, d = _run(run_cli, workdir / "r1", "--dataset", str(own), "dataset.npz_sample_axis=0")
    assert code == 0 and _split(d) == ("x", 0, 8, 256, 3)
    said, _ = caplog.text, caplog.clear()
    assert "npz: samples are x[i] along axis 0, 8 per file of 256 B on average, not DLIO's " \
        "x[..., i]; y is not read" in said, said

    # the client ceiling of this split is measured on generated files, the npz keys left out
    # (the probe once carried them onto its generated dataset and was refused)
    assert run_cli("ceiling", "dataset.source=existing", f"dataset.data_folder={own}",
                   "dataset.npz_sample_axis=0") == 0
    assert "measuring the client ceiling" in caplog.text
    caplog.clear()

    # the index was built for x[i]: a run asking for x whole indexes again, honoured
    code, d = _run(run_cli, workdir / "r2", "--dataset", str(own),
                   "dataset.num_samples_per_file=1")
    assert code == 0 and _split(d)[2:] == (1, 8 * 8 * 8 * 4, 3)
    said, _ = caplog.text, caplog.clear()
    assert "was built for another npz split (x[i] along axis 0)" in said
    assert "npz: each file is one sample, x whole (2,048 B on average), as " \
        "dataset.num_samples_per_file=1 asks; y is not read" in said, said

    # a count the split does not give is refused in one sentence, never ignored
    assert _run(run_cli, workdir / "r3", "--dataset", str(own), "dataset.npz_sample_axis=0",
                "dataset.num_samples_per_file=2")[0] == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dliobench: error: dataset.num_samples_per_file=2 does not match "
                              f"the files in {own}, which hold 8 sample(s) each as x[i] along "
                              "axis 0; leave it out, set it to 8"), err

    code, d = _run(run_cli, workdir / "r4", "--dataset", str(own), "dataset.npz_member=y")
    assert code == 0 and _split(d) == ("y", -1, 4, 8, 3)  # y's int64 labels, one per sample
    assert "x is not read" in caplog.text
    assert _run(run_cli, workdir / "r5", "--dataset", str(own), "dataset.npz_member=z")[0] == 2
    assert "vol0.npz has no member 'z' (it holds x, y)" in capsys.readouterr().err


def test_a_dlio_layout_is_split_alike_through_both_entry_paths(
        workdir: Path, run_cli: Callable[..., int], monkeypatch: pytest.MonkeyPatch) -> None:
    data = workdir / "dlio"
    written = write_dlio_dataset(data, files=16, dim=32)  # x: (32 + i % 3, 32, 1), y: [0]
    mean = round(float(np.mean([np.load(p)["x"].nbytes for p in written])))
    index = data / "dliobench-manifest"
    splits = []
    for n, args in enumerate((["--dataset", str(data)],  # num_files_train: the workload's 8
                              [f"dataset.data_folder={data}", "dataset.num_files_train=16"])):
        shutil.rmtree(index, ignore_errors=True)  # each path indexes the files itself
        code, d = _run(run_cli, workdir / f"r{n}", *args)
        assert code == 0
        splits.append((*_split(d), d["layout"]))
    assert splits[0] == splits[1] == ("x", -1, 1, mean, 16, "dlio")
    no_listing(monkeypatch)  # the other path asks for the same split: it trusts the index
    code, d = _run(run_cli, workdir / "r2", "--dataset", str(data))
    assert code == 0 and (*_split(d), d["layout"]) == splits[0]
    # as DLIO's command lines say it: one sample per file is x whole, the same split
    code, d = _run(run_cli, workdir / "r3", "--dataset", str(data),
                   "++workload.dataset.num_samples_per_file=1")
    assert code == 0 and (*_split(d), d["layout"]) == splits[0]


def test_npz_keys_are_refused_where_they_cannot_apply(workdir: Path,
                                                      run_cli: Callable[..., int],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("run", "dataset.npz_sample_axis=0", "dataset.num_files_train=2",
                   *QUICK) == 2
    assert "this run generates its dataset (x, a sample per row)" in capsys.readouterr().err
    folder = workdir / "arrays"
    folder.mkdir()
    np.save(folder / "a.npy", np.zeros((2, 64), np.uint8))
    assert run_cli("run", "--dataset", str(folder), "dataset.npz_member=y", *QUICK) == 2
    assert "apply to npz files, and" in capsys.readouterr().err
