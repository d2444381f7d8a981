"""The wheel is complete: installed into a fresh venv, it finds its workloads and sweep files
by name from any folder and runs a scaled-down UNet3D. The venv borrows this test venv's
installed dependencies (a .pth line), so nothing is downloaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_runs_shipped_workloads_by_name_from_any_folder(tmp_path: Path) -> None:
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "elsewhere"
    elsewhere.mkdir()
    source = tmp_path / "src"  # built from a copy: the build leaves nothing in the checkout
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", "data", "reports", "build", "*.egg-info", "__pycache__", ".*_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(dist), str(source)], check=True,
                   capture_output=True)
    wheel = next(dist.glob("dliobench-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # --ignore-installed: pip would otherwise uninstall this venv's own dliobench first
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--ignore-installed", "--prefix", str(venv), str(wheel)], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "-c", "import dliobench"], check=True)  # ours still there
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # import the wheel's copy
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    (site / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run([python, "-c", "import dliobench; print(dliobench.__file__)"],
                           capture_output=True, text=True, check=True, cwd=elsewhere, env=env)
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel, not this checkout
    done = subprocess.run([python, "-m", "dliobench", "run", "unet3d", "--no-progress",
                           "dataset.num_files_train=8", "dataset.record_length_bytes=64KiB",
                           "dataset.record_length_bytes_stdev=0", "reader.batch_size=2",
                           "train.computation_time=0.001", "dataset.data_folder=data"],
                          capture_output=True, text=True, cwd=elsewhere, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(next((elsewhere / "reports").glob("*/result.json")).read_text())
    assert result["workload"] == "unet3d" and result["metrics"]["exactly_once"] is True
    checked = subprocess.run([python, "-m", "dliobench", "check", "--json", "reports"],
                             capture_output=True, text=True, cwd=elsewhere,
                             env=env)  # upstream's files
    assert "unet3d_b200.yaml@" in checked.stdout, checked.stderr  # ship in the wheel
    dry = subprocess.run([python, "-m", "dliobench", "sweep", "unet3d_bert_scaling",
                          "--dry-run"], capture_output=True, text=True, cwd=elsewhere, env=env)
    assert dry.returncode == 0 and "all points load" in dry.stdout, dry.stderr
