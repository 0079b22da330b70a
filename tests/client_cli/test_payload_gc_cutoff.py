"""``payloads gc`` takes its cutoff at its own start, before it connects (docs/deployment.md#payload-retention).

It took it after connecting (3.6-12 s late against a slow cluster), so an object written while it
connected counted as older than the cutoff. Here the server is reached through a loopback TCP proxy that
holds each new connection for a while: the cutoff the command reports must come before the proxy saw it
connect.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

from cli_json_support import pinned

from agentsteps.cli import json_output

AGENTSTEPS = str(Path(sys.executable).with_name("agentsteps"))
HOLD_SECONDS = 1.5


class SlowProxy:
    """Forwards loopback TCP to ``target``, each connection only after ``HOLD_SECONDS``; notes the first."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.first: float | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.first = self.first or time.time()
            threading.Thread(target=self._forward, args=(conn,), daemon=True).start()

    def _forward(self, conn: socket.socket) -> None:
        time.sleep(HOLD_SECONDS)
        upstream = socket.create_connection(self.target)
        for src, dst in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pipe, args=(src, dst), daemon=True).start()

    def close(self) -> None:
        self.server.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_the_cutoff_is_taken_before_the_command_connects(temporal_env, tmp_path):
    proxy = SlowProxy(temporal_env.client.service_client.config.target_host)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSTEPS_", "AWS_", "TEMPORAL_"))}
    env.update(TEMPORAL_ADDRESS=f"127.0.0.1:{proxy.port}", AGENTSTEPS_STATE_DIR=str(tmp_path))
    launched = time.time()
    try:
        done = subprocess.run(
            [AGENTSTEPS, "payloads", "gc", "--older-than", "1h", "--json"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        proxy.close()

    assert done.returncode == 0, done.stderr
    started = datetime.fromisoformat(pinned(done.stdout, json_output.PAYLOADS_GC)["cutoff"]) + timedelta(hours=1)
    assert proxy.first is not None, "the command never connected"
    assert launched <= started.timestamp() <= proxy.first, "the cutoff comes from the command's start, not its connect"
