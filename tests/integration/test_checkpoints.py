"""The checkpoint-only workflow in one process: llama3_8b scaled down, torch.save files that
torch.load opens with the planned tensors, honest reads, the MLPerf figures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dliobench.config.load import load
from dliobench.run.checkpoint.layout import layout_for
from tests.conftest import last_result

PRESET = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
SMALL = ["checkpoint.scale=0.0001", "checkpoint.time_between_checkpoints=0",
         "checkpoint.checkpoint_folder=ckpt", "--no-progress"]


def test_writes_then_reads_torch_files_of_the_planned_tensors(
        workdir: Path, run_cli: Callable[..., int]) -> None:
    torch = pytest.importorskip("torch")
    assert run_cli("run", str(PRESET), *SMALL, "checkpoint.num_checkpoints_write=2",
                   "checkpoint.num_checkpoints_read=3", "checkpoint.keep=true") == 0
    result = last_result(workdir / "reports")
    ckpt = result["checkpoint"]
    assert ckpt["file_format"] == "torch" and ckpt["files_per_checkpoint"] == 16
    assert ckpt["write"]["count"] == 2 and ckpt["read"]["count"] == 3
    assert ckpt["layout"]["layout_ranks"] == 8 and ckpt["layout"]["scale"] == 0.0001
    for op in ("write", "read"):
        row = ckpt[op]["checkpoints"][0]
        assert row["duration_s"] > 0 and row["aggregate_bytes_per_s"] > 0
        assert row["bytes"] > ckpt["layout"]["planned_bytes"]  # tensors plus torch's framing
    assert ckpt["read_honesty"]["made_honest_by"] == "evicted"
    config, _ = load(PRESET, ["checkpoint.scale=0.0001"])
    layout = layout_for(config, 1)
    for rank in (0, 7):
        for shard in layout.rank_files(rank):
            state = torch.load(workdir / "ckpt/llama3_8b/checkpoint-0001" / shard.name)
            assert {k: v.numel() for k, v in state.items()} == {
                t.name: t.numel for t in shard.tensors}


def test_reads_without_eviction_are_flagged(workdir: Path, run_cli: Callable[..., int],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("run", str(PRESET), *SMALL, "checkpoint.file_format=raw",
                   "checkpoint.num_checkpoints_write=1", "checkpoint.num_checkpoints_read=1",
                   "checkpoint.evict_before_read=false") == 0
    result = last_result(workdir / "reports")
    honesty = result["checkpoint"]["read_honesty"]
    assert honesty["reads_honest"] is False and honesty["made_honest_by"] is None
    assert any("page cache" in w for w in result["warnings"])
    out = capsys.readouterr().out
    assert "not ensured" in out and "page cache" in out
    assert not (workdir / "ckpt/llama3_8b").exists()  # deleted once measured
    assert run_cli("report", str(workdir / "reports"), "-o", str(workdir / "page")) == 0
    assert (workdir / "page/checkpoints.png").stat().st_size > 0
    assert "checkpoint write" in (workdir / "page/report.html").read_text()


def test_a_read_only_run_reads_what_a_write_run_kept(workdir: Path,
                                                     run_cli: Callable[..., int]) -> None:
    raw = [*SMALL, "checkpoint.file_format=raw", "checkpoint.keep=true"]
    assert run_cli("run", str(PRESET), *raw, "checkpoint.num_checkpoints_write=1",
                   "checkpoint.num_checkpoints_read=0", "output.folder=written") == 0
    assert last_result(workdir / "written")["checkpoint"]["read"] is None
    assert run_cli("run", str(PRESET), *raw, "checkpoint.num_checkpoints_write=0",
                   "checkpoint.num_checkpoints_read=1", "output.folder=read") == 0
    result = last_result(workdir / "read")
    assert result["checkpoint"]["write"] is None
    assert result["checkpoint"]["read"]["bytes"] == result["checkpoint"]["layout"][
        "planned_bytes"]


@pytest.mark.parametrize("name", ["llama3_8b", "llama3_70b", "llama3_405b", "llama3_1t"])
def test_each_preset_runs_one_hosts_subset_scaled_down(
        name: str, workdir: Path, run_cli: Callable[..., int]) -> None:
    preset = PRESET.with_name(f"{name}.yaml")
    assert run_cli("run", str(preset), *SMALL, "checkpoint.scale=0.00001",
                   "checkpoint.mode=subset", "checkpoint.file_format=raw",
                   "checkpoint.num_checkpoints_write=1", "checkpoint.num_checkpoints_read=1",
                   f"output.folder={name}") == 0
    layout = last_result(workdir / name)["checkpoint"]["layout"]
    assert layout["launched_ranks"] == 1 and layout["mode"] == "subset"
    assert layout["rules_share"] == 1 / layout["layout_ranks"]
    # the first rank of the layout, as DLIO's subset mode runs it: at least the rules' share
    assert layout["share_of_checkpoint"] >= layout["rules_share"] * 0.99


def test_the_rules_check_a_checkpoint_run(workdir: Path, run_cli: Callable[..., int],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert run_cli("run", str(PRESET), *SMALL, "checkpoint.file_format=raw",
                   "checkpoint.num_checkpoints_write=1", "checkpoint.num_checkpoints_read=1") == 0
    capsys.readouterr()
    assert run_cli("check", str(workdir / "reports"), "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    status = {f["check"]: f["status"] for f in doc["findings"]}
    assert status["model"] == "fail"  # scaled down: not a benchmark run
    assert status["processes"] == "fail"  # 1 process, CLOSED wants 8
    assert status["fsync"] == "pass" and status["reads from storage"] == "pass"
    assert status["complete"] == "pass" and status["run count"] == "fail"
