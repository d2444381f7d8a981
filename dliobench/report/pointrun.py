"""One sweep point's process: run it, pass its progress lines on as they come (a long point
shows its epochs, not silence), keep its stderr for the error it ends with, and abandon it at
its time limit. ``report.sweep.run_point`` reads its result."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable

PROGRESS_LINES = ("epoch ", "training ")  # a point's live figures (``results.live``)
READERS_S = 10.0  # after a point's process ended, how long its output may take to drain


def run_streaming(argv: list[str], timeout: float | None,
                  on_line: Callable[[str], None] | None) -> tuple[int, str] | None:
    """Run a point's command: its progress lines to ``on_line`` as they come; its exit code
    and stderr, or None when it ran past ``timeout`` (then killed, its output abandoned)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []

    def lines() -> None:
        for line in proc.stdout or ():
            if on_line is not None and line.startswith(PROGRESS_LINES):
                on_line(line.rstrip("\n"))

    readers = [threading.Thread(target=lines, daemon=True),
               threading.Thread(target=lambda: stderr.append(proc.stderr.read() if proc.stderr
                                                             else ""), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    for reader in readers:
        reader.join(READERS_S)
    return code, "".join(stderr)
