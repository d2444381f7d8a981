"""The predictor's figures against hand computations from the shipped workload files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from dliobench.cli.main import main
from dliobench.comm.world import World
from dliobench.config.load import load
from dliobench.report.predict import Scale, predict, table
from dliobench.run import ceiling

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
TIB = 2**40


def _raw(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((WORKLOADS / f"{name}.yaml").read_text())
    return doc


def _predict(name: str, accel: str, scale: Scale) -> dict[str, Any]:
    config, _ = load(WORKLOADS / f"{name}.yaml", [], accel)
    return predict(config, scale)


@pytest.mark.parametrize(("name", "accel"), [("unet3d", "b200"), ("dlrm", "b200"),
                                             ("retinanet", "b200"), ("retinanet", "mi355")])
def test_demand_is_the_workload_files_figures(name: str, accel: str) -> None:
    raw = _raw(name)
    profile = raw["accelerators"][accel]
    batch = profile.get("batch_size", raw["reader"]["batch_size"])
    sample = raw["dataset"]["record_length_bytes"]
    per_file = raw["dataset"]["num_samples_per_file"]
    n, hosts = 64, 8
    # at the floor a step takes compute / floor: n * batch * floor / compute samples/s
    samples = n * batch * profile["au"] / profile["computation_time"]
    p = _predict(name, accel, Scale(n, hosts, TIB))
    d = p["demand"]
    assert d["samples_per_s"] == pytest.approx(samples, rel=0.01)
    assert d["bytes_per_s"] == pytest.approx(samples * sample, rel=0.01)
    assert d["files_opened_per_s"] == pytest.approx(samples / per_file, rel=0.01)
    (request,) = d["requests"]
    rows = batch if raw["dataset"]["format"] == "parquet" else 1  # a batch's rows in one read
    assert request["bytes"] == rows * sample
    assert request["per_s"] == pytest.approx(samples / rows, rel=0.01)
    # MLPerf Storage's rule: 5x the hosts' memory and 500 steps per accelerator
    files = max(math.ceil(5 * hosts * TIB / (sample * per_file)),
                math.ceil(500 * batch * n / per_file))
    assert p["dataset"]["files"] == files
    assert p["dataset"]["epoch_s"] == pytest.approx(files * per_file / samples)


def test_unet3d_b200_64_accelerators_on_paper() -> None:
    """The issue's acceptance figure: 64 x 7 x mean sample bytes / compute time x floor."""
    p = _predict("unet3d", "b200", Scale(64, 8, TIB))
    assert p["demand"]["bytes_per_s"] == pytest.approx(64 * 7 * 146600628 / 0.162 * 0.90,
                                                       rel=0.01)


def test_generation_checkpoint_and_unknown_client() -> None:
    raw = _raw("unet3d")
    p = _predict("unet3d", "b200", Scale(512, 64, TIB, 5e9, 30.0))
    assert p["dataset"]["generation_s"] == pytest.approx(p["dataset"]["bytes"] / 5e9)
    assert p["dataset"]["generation_files_per_s"] == pytest.approx(
        p["dataset"]["files"] / p["dataset"]["generation_s"])
    assert p["checkpoint"]["write_bytes_per_s"] == pytest.approx(
        raw["model"]["model_size_bytes"] / 30.0)  # optimizer_state_factor 0
    assert p["client"]["ranks_per_host"] == 8
    assert p["client"]["ceiling_samples_per_s_per_rank"] is None  # nothing cached here
    assert _predict("dlrm", "b200", Scale(1, 1, TIB))["checkpoint"] is None  # no model size


def test_client_cpu_from_a_cached_ceiling() -> None:
    """A cached ceiling serves the prediction only under the load it was measured under,
    the match ``run`` requires (``ceiling.load_matches``); otherwise the table says why not."""
    config, _ = load(WORKLOADS / "unet3d.yaml", [], "b200")
    world, now = World(local_size=8), ceiling.host_load(0.05)
    assert now is not None
    busier = {"cores": now["cores"], "busy_cores": now["cores"] + 1.0}  # never matches
    ceiling._remember(config, world, 30.0, {"cpu_s_per_sample": 0.02, "load": busier})
    stale = predict(config, Scale(16, 2, TIB))
    assert stale["client"]["ceiling_samples_per_s_per_rank"] is None
    assert stale["client"]["cpu_cores_per_host"] is None
    assert stale["client"]["ceiling_stale_load"] == busier
    assert f"measured with {busier['busy_cores']} of {now['cores']} cores busy" in table(stale)
    ceiling._remember(config, world, 30.0, {"cpu_s_per_sample": 0.02, "load": now})
    client = predict(config, Scale(16, 2, TIB))["client"]
    if not ceiling.load_matches(now, client["ceiling_load"]):  # this shared host's load moved
        assert client["ceiling_samples_per_s_per_rank"] is None
        return
    per_accel = 7 * 0.90 / 0.162
    assert client["client_keeps_up"] is False  # 30 samples/s < 38.9 demanded
    assert client["cpu_cores_per_host"] == pytest.approx(0.02 * per_accel * 8)


def test_cli_json_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(WORKLOADS / "retinanet.yaml")
    assert main(["predict", path, "--accelerators", "512", "--hosts", "64", "--host-memory",
                 "1TiB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["accelerator"] == "b200" and doc["client"]["host_memory_bytes"] == TIB
    assert main(["predict", path, "--accelerators", "512", "--hosts", "64"]) == 0
    assert "files opened" in capsys.readouterr().out
    assert main(["predict", path, "--accelerators", "2", "--hosts", "4"]) == 2
    assert "--hosts 4 is more than --accelerators 2" in capsys.readouterr().err
    assert main(["predict", path, "train.computation_time=0"]) == 2
    assert "has no compute time per batch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["predict", path, "--host-memory", "lots"])
    assert "'lots' is not a size" in capsys.readouterr().err
