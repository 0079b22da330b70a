"""The worker's HTTP side door: ``/metrics``, ``/healthz`` and ``/readyz``.

- ``/metrics``: the prometheus-client registry, which also carries Temporal's
  runtime metrics once ``telemetry.runtime.build_runtime`` installed its
  collector. OpenMetrics is served when the scraper asks for it.
- ``/healthz``: liveness; 200 while the process serves HTTP.
- ``/readyz``: readiness; 200 when the ``ready`` callback says so (the worker
  passes "my Temporal worker is polling, and every ``required`` MCP server is
  up"), else 503. The body is JSON: ``{"status": "ready" | "not ready", ...}``
  plus what the ``details`` callback adds (the worker: each MCP server's
  ``state``, ``last_error``, ``since`` and ``required``).

A stdlib threading server: it must keep answering while the event loop is
busy, and it needs nothing the worker does not already have.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .metrics import REGISTRY

METRICS_PATH = "/metrics"
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"


class MetricsServer:
    """A running server; ``port`` is the bound port (useful when asked for port 0)."""

    def __init__(self, httpd: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread
        host, port = httpd.server_address[:2]
        # An internet socket names its host as text; bytes would mean a unix socket, which this never binds.
        self.host = host if isinstance(host, str) else bytes(host).decode()
        self.port: int = port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def _readiness(ready: Callable[[], bool], details: Callable[[], dict[str, Any]] | None) -> tuple[bool, bytes]:
    try:
        is_ready = bool(ready())
    except Exception:  # a broken probe callback means "not ready", not a crashed server
        is_ready = False
    body: dict[str, Any] = {"status": "ready" if is_ready else "not ready"}
    if details is not None:
        try:
            body.update(details())
        except Exception as exc:
            body["details_error"] = type(exc).__name__
    return is_ready, (json.dumps(body, indent=2) + "\n").encode()


def _handler(
    registry: CollectorRegistry, ready: Callable[[], bool], details: Callable[[], dict[str, Any]] | None
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == METRICS_PATH:
                encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
                self._send(200, encoder(registry), content_type)
            elif path == HEALTH_PATH:
                self._send(200, b"ok\n")
            elif path == READY_PATH:
                is_ready, body = _readiness(ready, details)
                self._send(200 if is_ready else 503, body, "application/json")
            else:
                self._send(404, b"not found\n")

        def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            # One line per scrape would drown the worker's own logs.
            return

    return Handler


def start_metrics_server(
    port: int,
    host: str = "0.0.0.0",
    *,
    registry: CollectorRegistry = REGISTRY,
    ready: Callable[[], bool] = lambda: True,
    details: Callable[[], dict[str, Any]] | None = None,
) -> MetricsServer:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on a daemon thread; call ``.stop()`` at shutdown."""
    httpd = ThreadingHTTPServer((host, port), _handler(registry, ready, details))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="metrics-server", daemon=True)
    thread.start()
    return MetricsServer(httpd, thread)
