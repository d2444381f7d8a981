"""torch.save checkpoint shards serialised straight into the storage seam's writer
(``files.TorchStream``): torch.load reads back equal tensors, the writer gets fio's 4 MiB
requests, and nothing is spooled anywhere: an S3 shard goes up in multipart parts as torch
serialises it."""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dliobench.run.checkpoint.files import WRITE_BYTES, ShardWriter, TorchStream
from dliobench.run.checkpoint.layout import ShardFile, Tensor
from dliobench.run.checkpoint.space import Room
from dliobench.storage import Backend, backend_for
from dliobench.storage.posix import PosixBackend, PosixWriter

torch = pytest.importorskip("torch")

# 2 KB + 600 KB + 6.4 MB + 12 KB of tensors: across 4 MiB requests, over one 5 MiB S3 part
SHARD = ShardFile("model_states.pt", "model", (
    Tensor("small", 1000, "fp16"), Tensor("mid", 300_000, "bf16"),
    Tensor("big", 1_600_000, "fp32"), Tensor("odd", 12_345, "int8")))
ROOM = Room(0, SHARD.nbytes, None, "checkpoint.scale")


@pytest.fixture
def no_spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A temporary folder that is a file: any spool file (``tempfile``) fails to be made."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocker))


def _same_state(saved: dict[str, Any], shards: ShardWriter) -> None:
    want = shards._states[SHARD.name]
    assert list(saved) == list(want)
    for name, tensor in want.items():
        assert saved[name].dtype == tensor.dtype, name  # and the same bytes (random: NaNs)
        assert torch.equal(saved[name].view(torch.uint8), tensor.view(torch.uint8)), name


def test_a_posix_shard_loads_to_equal_tensors(tmp_path: Path, no_spool: None) -> None:
    backend = PosixBackend(str(tmp_path / "ckpt"))
    backend.make_room("c0")
    shards = ShardWriter([SHARD], "torch", seed=3)
    written = shards.write(backend, f"c0/{SHARD.name}", SHARD, durable=True, room=ROOM)
    path = tmp_path / "ckpt" / "c0" / SHARD.name
    assert written == path.stat().st_size > SHARD.nbytes  # counted as handed to the writer
    assert os.listdir(path.parent) == [SHARD.name]  # no temporary file left beside it
    _same_state(torch.load(path), shards)


class Recorded(PosixWriter):
    """A real POSIX writer that notes the size of every write it is handed."""

    sizes: list[int]

    def write(self, data: memoryview | bytes) -> None:
        self.sizes.append(len(memoryview(data).cast("B")))
        super().write(data)


def test_torch_writes_reach_the_writer_in_whole_requests(tmp_path: Path) -> None:
    state = {f"t{i}": torch.arange(7 ** i, dtype=torch.float32) for i in range(9)}  # to 23 MB
    writer = Recorded(str(tmp_path / "s.pt"), "s.pt", direct=False)
    writer.sizes = []
    stream = TorchStream(writer)
    torch.save(state, stream)  # type: ignore[arg-type]
    writer.commit(durable=True)
    assert set(writer.sizes[:-1]) == {WRITE_BYTES} and 0 < writer.sizes[-1] <= WRITE_BYTES
    assert sum(writer.sizes) == stream.written == (tmp_path / "s.pt").stat().st_size
    back = torch.load(tmp_path / "s.pt")
    assert all(torch.equal(back[k], v) for k, v in state.items())


def test_an_s3_shard_streams_its_parts_without_a_spool_file(s3_env: Any,
                                                           no_spool: None) -> None:
    from dliobench.storage.s3 import S3Backend

    found = backend_for(f"s3://{s3_env.bucket('ckpt-stream')}/run")
    assert isinstance(found, S3Backend)
    backend: Backend = S3Backend(found.where, replace(
        found.settings, endpoint_url=s3_env.endpoint, addressing_style="path",
        region="us-east-1", part_size=5 << 20))
    shards = ShardWriter([SHARD], "torch", seed=4)
    written = shards.write(backend, SHARD.name, SHARD, durable=True, room=ROOM)
    assert backend.size(SHARD.name) == written
    data = bytes(backend.read_range(SHARD.name, 0, written)[0])
    _same_state(torch.load(io.BytesIO(data)), shards)
