"""The emulated cluster's plan (comm/cluster_net.py): names, addresses in 127/8 (and in
198.18/15 for GlusterFS), link caps, and bad input as one sentence (the cluster itself:
tests/cluster)."""

from __future__ import annotations

import os

import pytest

from dliobench.base.errors import InputError
from dliobench.comm.cluster_net import plan_hosts


@pytest.mark.skipif(os.geteuid() != 0, reason="plan_hosts refuses without root, by design")
def test_hosts_get_names_addresses_and_caps() -> None:
    hosts = plan_hosts(2, 2, 40, None)
    assert [(h.name, h.role, h.address, h.link_bytes_per_s, h.data_address)
            for h in hosts] == [
        ("storage-0", "storage", "127.100.1.1", None, "198.18.1.1"),
        ("storage-1", "storage", "127.100.1.2", None, "198.18.1.2"),
        ("compute-0", "compute", "127.100.2.1", 40e6, "198.18.2.1"),
        ("compute-1", "compute", "127.100.2.2", 40e6, "198.18.2.2")]
    assert hosts[2].netns == "dlb-compute-0"


@pytest.mark.parametrize(("args", "words"), [
    ((0, 1, None, None), "1 to 250 compute hosts"),
    ((1, 0, None, None), "1 to 250 storage hosts"),
    ((1, 1, -3.0, None), "--link is a rate"),
    ((1, 1, None, 0.0), "--storage-link is a rate"),
])
def test_bad_input_is_one_sentence(args: tuple, words: str) -> None:
    with pytest.raises(InputError, match=words):
        plan_hosts(*args)
