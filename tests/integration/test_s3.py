"""Datasets in S3 end to end, on moto's S3 server (a real HTTP endpoint in its own process):
generate and train with the native and PyTorch loaders, repair by ``generate --verify``, no
LIST in a run, one sentence for each way of not reaching a bucket, no secret in any output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import S3Server, last_result, tiny_workload


def s3_workload(write_workload: Callable[..., Path], server: S3Server, bucket: str,
                **sections: dict[str, Any]) -> Path:
    """A tiny workload whose data folder is a prefix in ``bucket`` on ``server``."""
    doc = tiny_workload(**sections)
    doc["dataset"]["data_folder"] = f"s3://{bucket}/tiny"
    doc.setdefault("storage", {})["s3"] = {"endpoint_url": server.endpoint,
                                           "region": "us-east-1", "addressing_style": "path"}
    return write_workload(doc)


@pytest.mark.parametrize("loader", ["native", "pytorch", "dali"])
def test_generate_and_train_from_s3(workdir: Path, write_workload: Callable[..., Path],
                                    run_cli: Callable[..., int], s3_env: S3Server,
                                    capsys: pytest.CaptureFixture[str], loader: str) -> None:
    pytest.importorskip({"native": "numpy", "pytorch": "torch", "dali": "nvidia.dali"}[loader])
    bucket = s3_env.bucket(f"train-{loader}")
    # native: checkpoints to the bucket too, in parts of 5 MiB, read back
    ckpt = {"workflow": {"checkpoint": True}, "model": {"model_size_bytes": "12MiB"},
            "checkpoint": {"checkpoint_folder": f"s3://{bucket}/ckpt",
                           "read_after_write": True}} if loader == "native" else {}
    path = s3_workload(write_workload, s3_env, bucket,
                       reader={"data_loader": loader, "sample_shuffle": "seed"}, **ckpt)
    capsys.readouterr()
    assert run_cli("run", str(path), "--no-progress", "storage.s3.part_size=5MiB") == 0
    result = last_result(workdir / "reports")
    requests = result["metrics"].get("requests")
    # every GET of training timed, loader workers' too (DALI's come back beside the samples)
    assert requests is not None and requests["requests"] >= 12, requests
    for name in ("first_byte", "total"):
        assert 0 < requests[f"{name}_p50_s"] <= requests[f"{name}_p99_s"] \
            <= requests[f"{name}_max_s"] < 60
    assert requests["first_byte_p50_s"] <= requests["total_p50_s"] * 1.03
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert f"S3 GETs {requests['requests']:,}; first byte p50" in out, out
    if ckpt:
        assert result["checkpoint"]["count"] == 2
        assert result["checkpoint"]["bytes"] == 2 * (12 << 20)
        assert s3_env.client().list_objects_v2(Bucket=bucket, Prefix="ckpt")["KeyCount"] == 0
    m = result["metrics"]
    assert m["exactly_once"] is True and m["samples"] == 12
    listed = s3_env.client().list_objects_v2(Bucket=bucket, Prefix="tiny/train/")
    sizes = sorted(o["Size"] for o in listed["Contents"])
    assert len(sizes) == 8 and m["bytes"] == pytest.approx(12 * sizes[0], rel=0.01)
    assert result["storage"]["fs_type"] == "s3"
    assert result["storage"]["data_folder"] == f"s3://{bucket}/tiny"
    assert result["config"]["storage"]["storage_type"] == "s3"
    assert result["honesty"]["page_cache_possible"] is False
    assert not (workdir / "s3:").exists()  # nothing landed in a local folder named like it


def test_verify_rewrites_truncated_and_damaged_objects(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        s3_env: S3Server, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = s3_env.bucket("verify")
    path = s3_workload(write_workload, s3_env, bucket)
    assert run_cli("generate", str(path), "--no-progress") == 0
    client = s3_env.client()
    keys = sorted(o["Key"] for o in client.list_objects_v2(
        Bucket=bucket, Prefix="tiny/train/")["Contents"])
    good = {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys[:2]}
    client.put_object(Bucket=bucket, Key=keys[0], Body=good[keys[0]][:1000])  # truncated
    flipped = bytearray(good[keys[1]])
    flipped[len(flipped) // 2] ^= 0xFF  # same size, one byte damaged
    client.put_object(Bucket=bucket, Key=keys[1], Body=bytes(flipped))
    capsys.readouterr()
    assert run_cli("generate", str(path), "--verify", "--no-progress") == 0
    assert "wrote 2 of 8 files" in capsys.readouterr().out
    for key, data in good.items():
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    assert run_cli("generate", str(path), "--verify", "--no-progress") == 0
    assert "all 8 files are already in" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["missing bucket", "wrong endpoint", "bad credentials"])
def test_unreachable_buckets_are_one_sentence(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        s3_env: S3Server, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    bucket = "no-such-bucket" if case == "missing bucket" else s3_env.bucket("errors")
    path = s3_workload(write_workload, s3_env, bucket)
    extra = ["storage.s3.max_attempts=1"]
    if case == "wrong endpoint":
        extra.append("storage.s3.endpoint_url=http://127.0.0.1:9")  # the discard port
    if case == "bad credentials":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    capsys.readouterr()
    assert run_cli("run", str(path), "--no-progress", *extra) == 1
    err = capsys.readouterr().err.strip()
    expected = {"missing bucket": "the bucket 'no-such-bucket' does not exist at "
                                  f"{s3_env.endpoint}; create it",
                "wrong endpoint": "cannot reach the S3 endpoint http://127.0.0.1:9",
                "bad credentials": f"{s3_env.endpoint} refused the credentials"}[case]
    assert err.startswith("dliobench: error: ") and expected in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 1 and "not-the-secret" not in err


@pytest.mark.parametrize("case", ["secret key only", "secret key, key id in the environment",
                                  "key id only", "key id in the environment only"])
def test_half_a_key_pair_is_one_sentence_naming_the_missing_half(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        s3_env: S3Server, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """botocore's PartialCredentialsError (a 49-line traceback) becomes one sentence saying
    which key is missing and where the other came from, with no credential in it."""
    path = s3_workload(write_workload, s3_env, s3_env.bucket("half"))
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    if "in the environment" not in case:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    given = {"secret key only": f"storage.s3.secret_access_key={s3_env.secret_access_key}",
             "secret key, key id in the environment":
                 f"storage.s3.secret_access_key={s3_env.secret_access_key}",
             "key id only": f"storage.s3.access_key_id={s3_env.access_key_id}"}.get(case)
    capsys.readouterr()
    assert run_cli("run", str(path), "--no-progress", *([given] if given else [])) == 2
    err = capsys.readouterr().err.strip()
    expected = {"secret key only": "storage.s3.secret_access_key is given in the "
                                   "configuration without storage.s3.access_key_id; ",
                "secret key, key id in the environment": "without storage.s3.access_key_id "
                                                         "(AWS_ACCESS_KEY_ID is in the "
                                                         "environment, but",
                "key id only": "storage.s3.access_key_id is given in the configuration "
                               "without storage.s3.secret_access_key; ",
                "key id in the environment only": "AWS_ACCESS_KEY_ID is set in the "
                                                  "environment without AWS_SECRET_ACCESS_KEY"}
    assert err.startswith("dliobench: error: ") and expected[case] in err, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert s3_env.secret_access_key not in err and s3_env.access_key_id not in err


def test_secrets_in_the_configuration_never_reach_an_output(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        s3_env: S3Server, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    bucket = s3_env.bucket("secrets")
    path = s3_workload(write_workload, s3_env, bucket, storage={
        "storage_options": {"access_key_id": s3_env.access_key_id}})
    secret = s3_env.secret_access_key
    given = f"storage.storage_options.secret_access_key={secret}"
    assert run_cli("run", str(path), "--trace", "--no-progress", given) == 0
    assert run_cli("show-config", str(path), given) == 0
    with pytest.raises(SystemExit):  # a usage error repeats the arguments
        run_cli("run", str(path), "--no-progress", given, "--bogus")
    assert run_cli("run", str(path), "--no-progress", given, "storage.s3.max_attempts=1",
                   "storage.s3.endpoint_url=http://127.0.0.1:9") == 1
    out, err = capsys.readouterr()
    assert "<redacted>" in out and "s3_secret_access_key" in out  # show-config printed it
    outputs = [p for p in workdir.rglob("*") if p.is_file() and p != path]
    assert len(outputs) >= 3  # result.json, timeline.csv, the trace
    for text in [out, err, *(p.read_text(errors="replace") for p in outputs)]:
        assert secret not in text and s3_env.access_key_id not in text


def test_the_lock_object_waits_for_a_holder_and_takes_over_a_dead_one(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        s3_env: S3Server, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    import json
    import socket
    import subprocess
    import time

    bucket = s3_env.bucket("locks")
    path = s3_workload(write_workload, s3_env, bucket)
    client = s3_env.client()

    def lock(owner: str, until: float) -> None:
        client.put_object(Bucket=bucket, Key="tiny/.dliobench.lock", Body=json.dumps(
            {"owner": owner, "doing": "written (generating)", "until": until}).encode())

    from dliobench.dataset import lease

    monkeypatch.setattr(lease, "POLL_S", 0.05)
    # another host's generation, its lease ending (2 s: the command must start and look within
    # it, also on a loaded machine)
    lock("otherhost:123:abcd", time.time() + 2.0)
    assert run_cli("generate", str(path), "--no-progress") == 0  # waited, then took over
    assert "waiting for the writer of the dataset in s3://locks/tiny to finish (being written " \
        "(generating) by otherhost:123 (its lease runs to" in caplog.text
    gone = subprocess.Popen(["true"])  # a process of this host that is gone
    gone.wait()
    lock(f"{socket.gethostname()}:{gone.pid}:dead", time.time() + 600)
    assert run_cli("generate", str(path), "--no-progress") == 0
    lock("otherhost:123:abcd", time.time() - 1)  # a lease that ended
    assert run_cli("run", str(path), "--no-progress") == 0
    with pytest.raises(client.exceptions.ClientError):  # released at the end
        client.head_object(Bucket=bucket, Key="tiny/.dliobench.lock")


def test_lock_objects_let_readers_share_and_a_writer_wait_for_them(
        s3_env: S3Server, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Two readers hold the prefix at once; a writer waits for them (holding its object, so a
    third reader waits behind it); of two readers upgrading, one writes, and the other lets
    go its reader's object (they do not wait for each other), waits and reads again."""
    import threading

    from dliobench.config.load import load
    from dliobench.dataset import lease
    from dliobench.dataset.lock import LOCK_KEY
    from dliobench.storage import backend_for

    monkeypatch.setattr(lease, "POLL_S", 0.05)
    config, _ = load(None, [f"dataset.data_folder=s3://{s3_env.bucket('share')}/tiny",
                            *s3_env.overrides()])
    backend = backend_for(config.dataset.data_folder, config.storage)
    a, b, w, c, d = (lease.LeaseLock(backend, LOCK_KEY) for _ in range(5))
    threads: list[threading.Thread] = []

    def start(target: Callable[[], object]) -> threading.Thread:
        threads.append(threading.Thread(target=target, daemon=True))
        threads[-1].start()
        return threads[-1]

    try:
        a.acquire(False, "by a run")
        b.acquire(False, "by a run")  # at once, without waiting
        assert len(list(backend.list(f"{LOCK_KEY}.readers"))) == 2
        writer = start(lambda: w.acquire(True, "generating"))
        assert _eventually(lambda: "waiting for the dliobench runs reading the dataset in "
                           "s3://share/tiny to finish before writing it (2; first: "
                           in caplog.text)
        reader = start(lambda: c.acquire(False, "by a run"))  # behind the writer
        assert _eventually(lambda: "waiting for the writer of the dataset in s3://share/tiny "
                           "to finish (being written (generating) by" in caplog.text)
        assert writer.is_alive() and reader.is_alive()
        a.release()
        b.release()
        writer.join(10)
        assert not writer.is_alive() and w.exclusive and reader.is_alive()
        w.release()
        reader.join(10)
        assert not reader.is_alive() and not c.exclusive
        d.acquire(False, "by a run")
        waited: dict[str, bool] = {}
        # (one after the other: moto's conditional PUT is not atomic, S3's is)
        start(lambda: waited.__setitem__("c", c.upgrade("generating")))
        assert _eventually(lambda: c.exclusive)  # holding the writer's object, it waits for d
        start(lambda: waited.__setitem__("d", d.upgrade("generating")))
        assert _eventually(lambda: "c" in waited)  # d let go its reader's object to wait
        c.release()  # d waited for c as a writer, and reads again
        assert _eventually(lambda: "d" in waited)
        assert waited == {"c": True, "d": True} and not d.exclusive
    finally:
        for lock in (a, b, w, c, d):  # in the order the waiting ones need
            lock.release()
        for thread in threads:
            thread.join(10)
    assert list(backend.list("")) == []  # every lock object deleted


def _eventually(done: Callable[[], bool], seconds: float = 10) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    return done()


def test_a_killed_generation_resumes_and_a_run_lists_nothing(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        s3_env: S3Server) -> None:
    import signal
    import subprocess
    import sys
    import time

    bucket = s3_env.bucket("killed")
    path = s3_workload(write_workload, s3_env, bucket,
                       dataset={"num_files_train": 600, "record_length_bytes": 512},
                       reader={"batch_size": 50, "read_threads": 8}, train={"epochs": 1})
    proc = subprocess.Popen([sys.executable, "-m", "dliobench", "generate", str(path),
                             "--no-progress"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    client = s3_env.client()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not client.list_objects_v2(
            Bucket=bucket, Prefix="tiny/dliobench-manifest/journal").get("KeyCount"):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # no clean-up at all: its lock object stays behind
    proc.wait(timeout=30)
    assert client.head_object(Bucket=bucket, Key="tiny/.dliobench.lock")
    s3_env.counts(reset=True)
    assert run_cli("run", str(path), "--no-progress") == 0  # takes over the dead one's lock
    counts = s3_env.counts()
    result = last_result(workdir / "reports")
    assert 0 < result["generation"]["files"] < 600  # what the killed one had not recorded
    assert result["metrics"]["exactly_once"] is True
    # the manifest names every object: the one LIST is of the lock's readers' objects, made
    # once before writing
    assert counts.get("list", 0) == 1, counts
    # and is trusted: a HEAD checks each object written, none precedes reading the others
    assert counts.get("head", 0) < 100, counts  # (not one per object)
    assert counts["get"] >= 600 and counts["put"] >= result["generation"]["files"], counts
    with pytest.raises(client.exceptions.ClientError):  # released
        client.head_object(Bucket=bucket, Key="tiny/.dliobench.lock")


def test_checkpoint_only_runs_write_and_read_in_s3(
        workdir: Path, run_cli: Callable[..., int], s3_env: S3Server,
        caplog: pytest.LogCaptureFixture) -> None:
    """A checkpoint-only run in a bucket; unfinished uploads a killed run left under the
    same checkpoints are aborted first (and said), others' are left alone."""
    pytest.importorskip("torch")
    bucket = s3_env.bucket("ckpt-only")
    client = s3_env.client()
    left = {key: client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
            for key in ("ckpt/llama3_8b/checkpoint-0000/mp_rank_00_model_states.pt",
                        "ckpt/other_model/checkpoint-0000/x.pt")}
    preset = Path(__file__).resolve().parents[2] / "workloads" / "llama3_8b.yaml"
    assert run_cli("run", str(preset), "checkpoint.scale=0.0001",
                   "checkpoint.time_between_checkpoints=0", "checkpoint.num_checkpoints_write=1",
                   "checkpoint.num_checkpoints_read=1",
                   f"checkpoint.checkpoint_folder=s3://{bucket}/ckpt", *s3_env.overrides(),
                   "--no-progress") == 0
    result = last_result(workdir / "reports")
    ckpt = result["checkpoint"]
    assert ckpt["write"]["count"] == 1 and ckpt["read"]["count"] == 1
    assert ckpt["files_per_checkpoint"] == 16 and result["storage"]["fs_type"] == "s3"
    assert s3_env.client().list_objects_v2(Bucket=bucket)["KeyCount"] == 0  # not kept
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [
        ("ckpt/other_model/checkpoint-0000/x.pt", left["ckpt/other_model/checkpoint-0000/x.pt"])]
    assert "aborted 1 unfinished multipart upload(s) under" in caplog.text


def test_a_generation_killed_during_multipart_uploads_leaves_no_parts_behind(
        workdir: Path, write_workload: Callable[..., Path], run_cli: Callable[..., int],
        s3_env: S3Server, caplog: pytest.LogCaptureFixture) -> None:
    import signal
    import subprocess
    import sys
    import time

    bucket = s3_env.bucket("multipart-killed")
    path = s3_workload(write_workload, s3_env, bucket,
                       dataset={"num_files_train": 8, "record_length_bytes": "6MiB",
                                "record_length_bytes_stdev": 0, "num_samples_per_file": 1})
    proc = subprocess.Popen([sys.executable, "-m", "dliobench", "generate", str(path),
                             "--no-progress", "storage.s3.part_size=5MiB"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = s3_env.client()

    def uploads() -> list[dict[str, Any]]:
        return client.list_multipart_uploads(Bucket=bucket, Prefix="tiny/").get("Uploads", [])

    deadline = time.monotonic() + 60
    caught = False
    while not caught and time.monotonic() < deadline and proc.poll() is None:
        if uploads():  # stop it, then make sure the upload is still open (not completed)
            proc.send_signal(signal.SIGSTOP)
            caught = bool(uploads())
            if not caught:
                proc.send_signal(signal.SIGCONT)
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)  # mid-upload: parts sent, the upload never completed
    proc.wait(timeout=30)
    assert uploads(), "the generation ended before an upload was caught in progress"
    caplog.clear()
    assert run_cli("generate", str(path), "--no-progress", "storage.s3.part_size=5MiB") == 0
    assert uploads() == []  # the killed writer's parts were aborted, none of ours is left
    assert "unfinished multipart upload(s) under s3://multipart-killed/tiny" in caplog.text
    listed = client.list_objects_v2(Bucket=bucket, Prefix="tiny/train/")["Contents"]
    assert len(listed) == 8 and len({o["Size"] for o in listed}) == 1
    assert all(o["ETag"].endswith('-2"') for o in listed)  # each in 2 parts, completed
