"""A real Milvus server for the milvus engine's tests: milvus-lite's gRPC server (PyPI
milvus-lite 3.2.2, ``milvus-lite server --data-dir D --host H --port P``) on 127.0.0.1 and a
free port, started as its own process and stopped by the test that started it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One running milvus-lite server."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def flags(self) -> list[str]:
        """Upstream's flags naming it."""
        return ["--host", "127.0.0.1", "--port", str(self.port)]

    def stop(self) -> None:
        """SIGKILL it (a server dying) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)


def start(data_dir: Path, timeout_s: float = 60) -> Server:
    """Start a server on a free port and wait until it accepts connections."""
    port = free_port()
    log = data_dir.parent / f"{data_dir.name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "milvus_lite", "server", "--data-dir",
                                 str(data_dir), "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"milvus-lite server exited: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return Server(proc, port, log)
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"milvus-lite server did not listen on {port} in {timeout_s} s")
