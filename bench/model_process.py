"""The scripted model in its own process, as a model endpoint is in production.

In the benchmark's own process its HTTP thread would take the GIL from the
worker under measurement, so the engine would be charged for the test double.
Each ``scripted_model_process`` serves one script on a fixed port: a new
script is a new process on the same port, so a worker built once keeps its
base URL.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def openai_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1"


@dataclass(frozen=True)
class ModelProcess:
    url: str
    """The OpenAI base URL."""
    pid: int


@contextmanager
def scripted_model_process(script: dict[str, Any], port: int) -> Iterator[ModelProcess]:
    """Serve ``script`` on ``port`` until the block ends."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(script))
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentsteps.scripted_model", "--script", str(path), "--port", str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # the server prints its URLs once it listens
                if "OPENAI_BASE_URL=" in line:
                    break
            else:
                raise RuntimeError(f"the scripted model process exited with {proc.wait()}")
            yield ModelProcess(openai_url(port), proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
