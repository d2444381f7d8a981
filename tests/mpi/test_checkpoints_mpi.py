"""The acceptance run of the checkpoint issue under a real ``mpiexec``: llama3_8b scaled down,
an 8-rank layout on 4 launched ranks (two shards each), 10 writes then 10 reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from dliobench.config.load import load
from dliobench.run.checkpoint.layout import layout_for
from tests.conftest import last_result
from tests.mpi.test_mpi import MPIEXEC, mpirun

pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (install the mpi extra)")]

PRESET = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
SCALE = "checkpoint.scale=0.0002"


def test_four_ranks_write_and_read_an_8_rank_layout(workdir: Path) -> None:
    torch = pytest.importorskip("torch")
    proc = mpirun(4, "run", str(PRESET), SCALE, "checkpoint.time_between_checkpoints=0",
                  "checkpoint.checkpoint_folder=ckpt", "checkpoint.keep=true", "--no-progress",
                  timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "reads from storage" in proc.stdout and "yes (evicted)" in proc.stdout
    result = last_result(workdir / "reports")
    ckpt = result["checkpoint"]
    assert result["ranks_count"] == 4
    assert ckpt["layout"]["layout_ranks"] == 8 and ckpt["layout"]["launched_ranks"] == 4
    assert ckpt["write"]["count"] == 10 and ckpt["read"]["count"] == 10
    assert ckpt["files_per_checkpoint"] == 16
    for op in ("write", "read"):
        for row in ckpt[op]["checkpoints"]:
            assert row["files"] == 16 and row["bytes"] > ckpt["layout"]["planned_bytes"]
    config, _ = load(PRESET, [SCALE])
    layout = layout_for(config, 1)
    last = workdir / "ckpt/llama3_8b/checkpoint-0009"
    assert len(list(last.iterdir())) == 16
    for rank in range(8):  # every rank's files, written by launched rank rank % 4
        for shard in layout.rank_files(rank):
            state = torch.load(last / shard.name)
            assert {k: v.numel() for k, v in state.items()} == {
                t.name: t.numel for t in shard.tensors}


def test_a_layout_the_ranks_cannot_split_is_one_sentence(workdir: Path) -> None:
    proc = mpirun(3, "run", str(PRESET), SCALE, "--no-progress")
    assert proc.returncode == 2
    assert "do not divide evenly over 3 launched ranks" in proc.stderr
    assert "Traceback" not in proc.stderr
