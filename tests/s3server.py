"""A real S3 HTTP endpoint for the tests: moto's standalone server in its own process, on
127.0.0.1, with a count of the requests it served by kind (``GET /_counts``, reset by
``POST /_counts``), so a test can say how many LISTs a run issued, counted at the server.

Run as ``python tests/s3server.py PORT [CAP_BYTES_PER_S]``; prints ``ready`` once it listens.
With a cap, the bodies of all answers together leave at most that many bytes per second (a
capped endpoint, for benchmarks of a storage-bound run). Credentials are
checked (moto's IAM enforcement after the first ``INITIAL_NO_AUTH_ACTION_COUNT`` requests,
which the fixture spends creating a user and its key).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

COUNTS: Counter[str] = Counter()
_LOCK = threading.Lock()


def kind(environ: dict[str, Any]) -> str:
    """list, get, put, head, delete, post or other: what one request was (path style)."""
    method = environ["REQUEST_METHOD"]
    parts = environ.get("PATH_INFO", "/").strip("/").split("/", 1)
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    if method == "GET" and len(parts) == 1 and parts[0] and not (
            set(query) & {"location", "uploads", "versioning", "policy", "acl", "tagging"}):
        return "list"
    return method.lower()


class Cap:
    """A shared link of ``rate`` bytes/s: each body waits for its turn on it."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._free_at = 0.0
        self._lock = threading.Lock()

    def send(self, body: Iterable[bytes]) -> Iterable[bytes]:
        """Yield ``body``'s chunks, each once the link has carried it."""
        for chunk in body:
            with self._lock:
                now = time.monotonic()
                start = max(now, self._free_at)
                self._free_at = start + len(chunk) / self.rate
                done = self._free_at
            time.sleep(max(0.0, done - time.monotonic()))
            yield chunk


def counting(app: Callable[..., Iterable[bytes]],
             cap: Cap | None = None) -> Callable[..., Iterable[bytes]]:
    """The moto app, counting requests (and capped), with ``/_counts`` answered here."""

    def wrapped(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/_counts":
            with _LOCK:
                if environ["REQUEST_METHOD"] == "POST":
                    COUNTS.clear()
                body = json.dumps(dict(COUNTS)).encode()
            start("200 OK", [("Content-Type", "application/json"),
                             ("Content-Length", str(len(body)))])
            return [body]
        with _LOCK:
            COUNTS[kind(environ)] += 1
        body = app(environ, start)
        return cap.send(body) if cap is not None else body

    return wrapped


def main() -> None:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    port = int(sys.argv[1])
    cap = Cap(float(sys.argv[2])) if len(sys.argv) > 2 else None
    server = make_server("127.0.0.1", port, counting(
        DomainDispatcherApplication(create_backend_app), cap), threaded=True,
        request_handler=MotoRequestHandler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
