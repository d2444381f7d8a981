"""The verdict of a vector-database run on a server (the milvus engine): when the client was
not the limit, what the server's index is decides it. An index the server keeps in memory
(milvus-lite's, always: FAISS or a brute-force scan) makes the run a measure of the server's
memory and CPU, never of storage; a disk index on a Milvus server (DISKANN, AISAQ) reads the
server's own storage, which this client does not count."""

from __future__ import annotations

from typing import Any

LOCAL = ("127.", "localhost", "::1", "0.0.0.0")  # a server on the client's own host


def server_of(facts: dict[str, Any]) -> dict[str, Any] | None:
    """The build parameters of a server's index (the milvus engine's manifest), else None."""
    params = (facts.get("index") or {}).get("params") or {}
    return params if "server" in params else None


def host_cpu_counts(facts: dict[str, Any]) -> bool:
    """Whether the host-CPU rule of the client verdict applies: not when the server runs on
    the client's host, whose CPUs then count the server's work too (only the rank's own
    interpreter then says the client was the limit)."""
    server = server_of(facts)
    return server is None or not str(server.get("server", "")).startswith(LOCAL)


def server_verdict(facts: dict[str, Any], found: dict[str, Any]) -> dict[str, Any]:
    """``found`` (the client-side verdict) unless the run was on a server and its client was
    not the limit; then the server's memory/CPU, or its storage (uncounted)."""
    server = server_of(facts)
    if server is None or found.get("limiter") == "client CPU":
        return found
    built, where = str(server.get("built_index_type", "?")).upper(), server.get("server", "?")
    if server.get("in_memory", True):
        return {"limiter": "server memory/CPU", "reason": f"the server at {where} "
                f"({server.get('server_version')}) keeps its {built} index in memory, so no "
                "query read storage: this run measures the server's memory and CPU, not "
                "storage" + ("" if host_cpu_counts(facts) else " (the server shares this "
                             "host's CPUs with the client)")}
    return {"limiter": "server", "reason": f"the server at {where} searches its {built} index "
            "on its own storage, whose reads this client does not count"}
