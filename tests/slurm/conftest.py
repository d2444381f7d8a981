"""The session's Slurm cluster (tests/slurm/cluster.py) on 127.0.0.1, stopped after the tests.

Nothing is installed here: ``make test`` installs Debian's slurm-wlm where it can (root with
apt-get); elsewhere the tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator

import pytest

from tests.slurm.cluster import Cluster, running


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """slurmctld and two slurmd (nodes n1, n2) for the session's tests."""
    if shutil.which("slurmctld") is None or shutil.which("slurmd") is None:
        pytest.skip("Slurm is not installed (`make test` installs Debian's slurm-wlm as root; "
                    "or apt-get install slurm-wlm)")
    if os.geteuid() != 0:
        pytest.skip("the test Slurm cluster runs slurmd as root (run the tests as root)")
    with contextlib.ExitStack() as stack:
        try:
            cluster = stack.enter_context(running(tmp_path_factory.mktemp("slurm")))
        except RuntimeError as exc:  # a daemon ended, or the nodes never came up: its logs
            pytest.fail(str(exc))
        yield cluster
