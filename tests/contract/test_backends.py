"""BackendContract: the suite every storage backend passes (``storage.backend.Backend``).

A backend subclasses ``BackendContract`` with a ``backend`` fixture (a fresh, empty root)
and gets the whole suite: ranged and counted reads, the streaming writer's atomic commit and
abort, direct writes of any size, small atomic objects, durable appends, stat, eviction,
listing. The POSIX backend is the first; the S3 issue adds the second.
"""

from __future__ import annotations

import io
import itertools
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dliobench.storage.backend import Backend
from dliobench.storage.buffers import AlignedBuffer
from dliobench.storage.posix import PosixBackend


def payload(size: int, seed: int = 1) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def put_object(backend: Backend, key: str, data: bytes) -> None:
    backend.make_room(key.rsplit("/", 1)[0] if "/" in key else "")
    writer = backend.open_write(key)
    writer.write(data)
    writer.commit()


class BackendContract:
    """What every backend must do; subclasses provide the ``backend`` fixture."""

    # A buffered file object transfers exactly what its library reads (POSIX: the page
    # cache's read-ahead is not a transfer); an object store's reads ahead in one request.
    exact_file_reads = True

    def test_ranged_reads_return_and_count_the_bytes(self, backend: Backend) -> None:
        data = payload(100_000)
        put_object(backend, "a/b/obj", data)
        got, nbytes = backend.read_range("a/b/obj", 1000, 5000)
        assert bytes(got) == data[1000:6000] and nbytes == 5000
        tail, nbytes = backend.read_range("a/b/obj", 99_000, 5000)  # past the end: short
        assert bytes(tail) == data[99_000:] and nbytes == 1000
        direct, counted = backend.read_range("a/b/obj", 1000, 5000, direct=True)
        assert bytes(direct) == data[1000:6000] and counted >= 5000
        assert backend.size("a/b/obj") == 100_000
        with pytest.raises(FileNotFoundError):
            backend.read_range("a/b/none", 0, 10)
        assert backend.size("a/b/none") is None and backend.stat("a/b/none") is None

    def test_file_objects_count_what_a_library_reads(self, backend: Backend) -> None:
        data = payload(50_000)
        put_object(backend, "obj", data)
        for direct, sequential in ((False, False), (True, False), (False, True)):
            reader = backend.open_read("obj", direct, sequential)
            try:
                reader.seek(10_000)
                buf = bytearray(3000)
                assert reader.readinto(buf) == 3000 and bytes(buf) == data[10_000:13_000]
                assert reader.tell() == 13_000
                exact = self.exact_file_reads and not direct
                assert reader.nbytes == 3000 if exact else reader.nbytes >= 3000
            finally:
                reader.close()

    def test_commit_is_atomic_and_abort_leaves_nothing(self, backend: Backend) -> None:
        put_object(backend, "obj", b"old")
        writer = backend.open_write("obj")
        writer.write(b"new ")
        assert backend.size("obj") == 3  # nothing of the new object before commit
        writer.write(b"content")
        writer.commit()
        assert bytes(backend.read_range("obj", 0, 100)[0]) == b"new content"
        aborted = backend.open_write("obj")
        aborted.write(b"never seen")
        aborted.abort()
        assert bytes(backend.read_range("obj", 0, 100)[0]) == b"new content"
        assert sorted(backend.list()) == ["obj"]  # no temporary object is left

    @pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096 + 17, 5 << 20])
    def test_streamed_direct_writes_of_any_size(self, backend: Backend, size: int) -> None:
        data = payload(size, seed=size)
        buffer = AlignedBuffer()
        view = buffer.view(max(size, 1))
        view[:size] = data
        writer = backend.open_write(f"w{size}", direct=True)
        half = (size // 2) // 4096 * 4096  # whole blocks, then the rest
        writer.write(view[:half])
        writer.write(view[half:size])
        writer.commit(durable=True)
        assert backend.size(f"w{size}") == size
        assert bytes(backend.read_range(f"w{size}", 0, size + 10)[0]) == data

    def test_unaligned_memory_in_a_direct_write_still_lands(self, backend: Backend) -> None:
        data = payload(10_000)
        writer = backend.open_write("u", direct=True)
        writer.write(data)  # bytes objects are not page aligned
        writer.commit()
        assert bytes(backend.read_range("u", 0, 20_000)[0]) == data

    @pytest.mark.parametrize("durable", [False, True])  # torch.save'd checkpoints: durable
    def test_a_library_can_write_the_spool_file(self, backend: Backend, durable: bool) -> None:
        writer = backend.open_write("spooled")
        writer.spool_path().write_bytes(b"written by a library")
        assert backend.size("spooled") is None
        writer.commit(durable=durable)
        assert bytes(backend.read_range("spooled", 0, 100)[0]) == b"written by a library"

    def test_small_objects_and_first_writer_wins(self, backend: Backend) -> None:
        assert backend.put("meta.json", b"{}")
        assert backend.put("meta.json", b'{"a": 1}')
        assert not backend.put("meta.json", b"later", replace=False)
        assert bytes(backend.read_range("meta.json", 0, 100)[0]) == b'{"a": 1}'

    def test_appends_accumulate_durably(self, backend: Backend) -> None:
        for k in range(3):
            backend.append("journal", bytes([k]) * 10)
        assert bytes(backend.read_range("journal", 0, 100)[0]) == b"".join(
            bytes([k]) * 10 for k in range(3))
        backend.delete("journal")
        backend.delete("journal")  # deleting what is gone is fine
        assert backend.size("journal") is None

    def test_stat_version_changes_when_rewritten(self, backend: Backend) -> None:
        put_object(backend, "v", b"one")
        first = backend.stat("v")
        put_object(backend, "v", b"three")
        second = backend.stat("v")
        assert first is not None and second is not None
        assert second.size == 5 and first.version != second.version

    def test_evict_sync_facts_list_and_pickle(self, backend: Backend) -> None:
        for key in ("x/2", "x/1", "y"):
            put_object(backend, key, b"z" * 10)
        backend.sync()
        backend.evict(["x/1", "y"])
        assert bytes(backend.read_range("x/1", 0, 10)[0]) == b"z" * 10
        assert list(backend.list("x")) == ["x/1", "x/2"]
        assert sorted(backend.list()) == ["x/1", "x/2", "y"]
        assert (backend.free_bytes() or 1) > 0 and isinstance(backend.facts(), dict)
        clone = pickle.loads(pickle.dumps(backend))  # loader worker processes get it
        assert bytes(clone.read_range("y", 0, 10)[0]) == b"z" * 10
        assert backend.describe("y").endswith("y")


class TestPosixBackend(BackendContract):
    """The POSIX backend on a real file system (this machine's ext4)."""

    @pytest.fixture
    def backend(self, tmp_path: Path) -> Backend:
        backend = PosixBackend(str(tmp_path / "root"))
        backend.make_room("")
        return backend

    def test_keys_are_files_under_the_root(self, tmp_path: Path) -> None:
        backend = PosixBackend(str(tmp_path))
        put_object(backend, "d/e/f.bin", b"abc")
        assert (tmp_path / "d/e/f.bin").read_bytes() == b"abc"
        assert backend.local_path("d/e/f.bin") == tmp_path / "d/e/f.bin"
        assert io.BytesIO((tmp_path / "d/e/f.bin").read_bytes()).read() == b"abc"

    def test_a_large_buffered_file_written_behind_lands_whole(self, backend: Backend) -> None:
        """Writeback starts every ``WRITE_BEHIND_BYTES`` of a buffered file (uneven pieces
        across several such marks); the committed file holds every byte in order."""
        from dliobench.storage.posix import WRITE_BEHIND_BYTES

        size = 2 * WRITE_BEHIND_BYTES + 12345
        data = payload(size, seed=7)
        writer = backend.open_write("big")
        pieces = [0, 5 << 20, WRITE_BEHIND_BYTES + 3, 2 * WRITE_BEHIND_BYTES - 1, size]
        started = []  # where writeback had been started up to, after each piece
        for start, end in itertools.pairwise(pieces):
            writer.write(memoryview(data)[start:end])
            started.append(writer._behind)  # type: ignore[attr-defined]
        assert started == [0, WRITE_BEHIND_BYTES + 3, WRITE_BEHIND_BYTES + 3, size]
        writer.commit(durable=True)
        assert backend.size("big") == size
        assert bytes(backend.read_range("big", 0, size)[0]) == data


class TestS3Backend(BackendContract):
    """The S3 backend on moto's S3 server (a real HTTP endpoint in its own process)."""

    exact_file_reads = False

    @pytest.fixture
    def backend(self, s3_env: Any, request: pytest.FixtureRequest) -> Backend:
        from dliobench.storage import backend_for
        from dliobench.storage.s3 import S3Backend

        bucket = s3_env.bucket("contract")
        prefix = request.node.name.replace("[", "-").replace("]", "")
        backend = backend_for(f"s3://{bucket}/{prefix}")
        assert isinstance(backend, S3Backend)
        return S3Backend(backend.where, replace(backend.settings, endpoint_url=s3_env.endpoint,
                                                addressing_style="path", region="us-east-1",
                                                part_size=5 << 20))

    def test_large_objects_go_up_in_checked_parts(self, backend: Any, s3_env: Any) -> None:
        data = payload(11 << 20)  # parts of 5 MiB: 5 + 5 + 1
        writer = backend.open_write("big")
        for start in range(0, len(data), 3 << 20):
            writer.write(data[start:start + (3 << 20)])
        writer.commit()
        head = s3_env.client().head_object(Bucket=backend.bucket, Key=backend.name("big"),
                                           ChecksumMode="ENABLED")
        assert head["ContentLength"] == len(data) and head["ChecksumCRC32C"]
        assert bytes(backend.read_range("big", (5 << 20) - 10, 20)[0]) == \
            data[(5 << 20) - 10:(5 << 20) + 10]

    @pytest.mark.parametrize("client", ["obstore", "boto3"])
    def test_a_runs_reads_are_alike_through_either_client_and_timed(
            self, backend: Any, client: str) -> None:
        pytest.importorskip(client)
        from dliobench.storage import latency
        from dliobench.storage import timed as timing

        data = payload(1000)
        backend.put("obj", data)
        timed = timing(replace(backend, settings=replace(backend.settings,
                                                                 read_client=client)))
        latency.take()
        for offset, length in [(0, 1000), (10, 20), (990, 50), (1000, 5), (4000, 5)]:
            got, counted = timed.read_range("obj", offset, length)
            assert bytes(got) == data[offset:offset + length] and counted == len(got)
        with pytest.raises(FileNotFoundError):
            timed.read_range("no-such-object", 0, 10)
        log = latency.take()
        assert log is not None and log.count >= 3  # each GET that answered
        assert 0 < log.summary()["first_byte_p50_s"] <= log.total_max_s
        backend.read_range("obj", 0, 10)  # not a run's data read: not timed
        assert latency.take() is None

    def test_without_checksums_sizes_and_md5_etags_are_checked(self, backend: Any) -> None:
        plain = replace(backend, settings=replace(backend.settings, checksums=False))
        for key, size in (("small", 100_000), ("parts", (5 << 20) + 1)):
            data = payload(size)
            put_object(plain, key, data)
            assert bytes(plain.read_range(key, size - 10, 10)[0]) == data[-10:]
