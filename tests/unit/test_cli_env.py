"""The command's process starts numpy with one OpenBLAS thread (dliobench does no linear
algebra; the default's thread per core competes with the readers), unless the user said."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = ("import os, dliobench.cli, numpy; "
         "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))")


def _probe(env: dict[str, str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout.split()


def test_one_openblas_thread_unless_the_user_set_it() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _probe(env) == ["1", "1"]  # the variable, and no thread besides the main one
    assert _probe({**env, "OPENBLAS_NUM_THREADS": "2"})[0] == "2"
