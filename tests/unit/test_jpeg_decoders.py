"""reader.decoder: each JPEG decoder gives Pillow's pixels on a real retinanet-sized file, a
run's result and console name the decoder, a missing library is one sentence, and the
ceiling's decoder table turns a measured rate into cores per B200."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dliobench.base.errors import ConfigError, CorruptSampleError
from dliobench.config.load import load
from dliobench.config.names import DECODER_NAMES
from dliobench.formats import decode_rates, get_format
from dliobench.formats._decoders import available, decoder_for
from dliobench.loaders.base import SampleReader
from dliobench.results.decode_table import decode_table
from tests.conftest import last_result

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
RETINANET = 322_957  # bytes per file: workloads/retinanet.yaml


def _usable(name: str) -> None:
    missing = available(name)
    if missing:
        pytest.skip(missing)


@pytest.fixture(scope="module")
def retinanet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file as `dliobench generate retinanet` writes it (568 x 568 gray, 323 KB)."""
    path = tmp_path_factory.mktemp("jpeg") / "img.jpg"
    sample = np.random.default_rng(5).integers(0, 256, (1, RETINANET), dtype=np.uint8)
    get_format("jpeg").write(path, sample)
    return path


@pytest.mark.parametrize("name", DECODER_NAMES)
def test_every_decoder_reads_pils_pixels(name: str, retinanet_file: Path) -> None:
    """All use libjpeg-turbo's accurate integer IDCT: equal arrays, not within a tolerance."""
    _usable(name)
    fmt = get_format("jpeg")
    size = retinanet_file.stat().st_size
    want, _ = SampleReader.for_paths(fmt, [retinanet_file], [size], 1).read(0)
    got, nbytes = SampleReader.for_paths(fmt.with_decoder(name), [retinanet_file], [size],
                                         1).read(0)
    assert got.shape == want.shape == (568, 568) and got.dtype == np.uint8
    assert np.array_equal(got, want) and nbytes == size
    colour = io.BytesIO()  # a 4:2:0 colour JPEG: RGB rows x columns x 3, as np.asarray gives
    Image.fromarray(np.random.default_rng(1).integers(0, 256, (30, 44, 3), np.uint8)).save(
        colour, "JPEG")
    src = fmt.with_decoder(name)
    pixels = src.decode("c.jpg", memoryview(colour.getvalue()), True)  # type: ignore[arg-type]
    assert pixels.shape == (30, 44, 3)
    assert np.array_equal(pixels, np.asarray(Image.open(io.BytesIO(colour.getvalue()))))
    headless = retinanet_file.read_bytes()[:1000] + b"\xff\xd9"  # padding, then the end
    with pytest.raises(CorruptSampleError, match="damaged"):
        src.decode("d.jpg", memoryview(headless), True)  # type: ignore[arg-type]


def test_a_run_names_its_decoder(workdir: Path, run_cli: Callable[..., int],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _usable("dali")  # the decoder of the dali extra: installed with the tests' extras
    code = run_cli("run", str(WORKLOADS / "retinanet.yaml"), "reader.data_loader=native",
                   "reader.decoder=dali", f"dataset.data_folder={workdir / 'data'}",
                   "dataset.num_files_train=16", "dataset.record_length_bytes=16KiB",
                   "reader.batch_size=4", "reader.read_threads=1", "train.computation_time=0",
                   "train.epochs=1", "--no-progress")
    assert code == 0
    assert last_result(workdir / "reports")["config"]["reader"]["decoder"] == "dali"
    assert "native / jpeg (decoded by dali)" in capsys.readouterr().out


def test_a_forked_worker_builds_its_own_dali_pipeline(retinanet_file: Path) -> None:
    """As a PyTorch DataLoader worker forks after the plan built the parent's pipeline: the
    parent's DALI threads are gone in the child, so reusing its pipeline there would hang."""
    _usable("dali")
    data = retinanet_file.read_bytes()
    want = decoder_for("pil")(data)
    decoder_for("dali")(data)  # the parent's pipeline, as the plan's check builds it
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it decoded Pillow's pixels, then leave at once
        same = np.array_equal(decoder_for("dali")(data), want)
        os.write(write_end, b"1" if same else b"0")
        os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + 30  # a hang guard: the decode takes milliseconds
    ended = False
    while not ended and time.monotonic() < deadline:
        ended = os.waitpid(pid, os.WNOHANG) != (0, 0)
        time.sleep(0.01)
    if not ended:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.set_blocking(read_end, False)
    with contextlib.suppress(BlockingIOError):
        assert os.read(read_end, 1) == b"1"
        return
    pytest.fail("the forked child did not decode within 30 s (it hung on the parent's pipeline)")


def test_a_missing_decoder_library_is_one_sentence(workdir: Path) -> None:
    missing = [n for n in DECODER_NAMES if available(n)]
    if not missing:
        pytest.skip("every decoder's library is installed here")
    done = subprocess.run([sys.executable, "-m", "dliobench", "run", "retinanet",
                           f"reader.decoder={missing[0]}", "dataset.num_files_train=4",
                           "reader.batch_size=2", "reader.read_threads=1", "--no-progress"],
                          capture_output=True, text=True, cwd=workdir, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr  # as a missing extra
    assert "install" in lines[0] and "Traceback" not in done.stderr


@pytest.mark.parametrize("overrides", [["dataset.format=png"],
                                       ["reader.data_loader=dali",
                                        "reader.dali_native_reader=true"]])
def test_decoders_are_refused_where_they_would_not_run(overrides: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"reader\.decoder"):
        load(WORKLOADS / "retinanet.yaml", ["reader.decoder=simplejpeg", *overrides])


def test_the_ceiling_table_gives_cores_per_b200_from_the_measured_rate() -> None:
    cfg, _ = load(WORKLOADS / "retinanet.yaml")  # b200: 24 images per 0.04755 s
    rates = decode_rates.measure_all(decode_rates.sample_files(RETINANET, count=2),
                                     ["pil", "turbojpeg"], seconds=0.15, reps=1)
    pil = rates[0]
    assert pil.per_cpu_s > 50 and pil.per_wall_s > 0
    assert pil.cores_for(24 / 0.04755) == pytest.approx(504.7 / pil.per_cpu_s, rel=1e-3)
    lines = decode_table(cfg, rates, load=1.5)
    assert "one b200 demands 504.7 images/s" in lines[0] and "load average 1.5" in lines[0]
    row = next(line for line in lines if line.split()[0] == "pil")
    assert f"{504.7 / pil.per_cpu_s:.2f} (reader.decoder)" in row
    if rates[1].missing:  # a decoder not installed says what to install in its row
        assert "not measured" in lines[-1] and "install" in lines[-1]
