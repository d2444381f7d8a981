"""A real S3 HTTP endpoint for the tests: moto's standalone server in its own process, on
127.0.0.1, with a count of the requests it served by kind (``GET /_counts``, reset by
``POST /_counts``), so a test can say how many LISTs a run issued, counted at the server.

Run as ``python tests/s3server.py PORT``; prints ``ready`` once it listens. Credentials are
checked (moto's IAM enforcement after the first ``INITIAL_NO_AUTH_ACTION_COUNT`` requests,
which the fixture spends creating a user and its key).
"""

from __future__ import annotations

import json
import sys
import threading
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


def counting(app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """The moto app, counting requests, with ``/_counts`` answered here."""

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
        return app(environ, start)

    return wrapped


def main() -> None:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    port = int(sys.argv[1])
    server = make_server("127.0.0.1", port, counting(
        DomainDispatcherApplication(create_backend_app)), threaded=True,
        request_handler=MotoRequestHandler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
