"""A newcomer's machine for the first-hour tests: a fresh clone, ``make demo``, then ``agentsteps dev``.

The clone is of the repository's committed HEAD into a temporary folder, with
no API key and no agentsteps on the ``PATH``: what someone gets from
``git clone``. Commands run in ``bash`` inside the clone after
``. .venv/bin/activate``, as the README says. The stack is moved to free
ports (other processes on this machine own 7233/8233/8234); that is the only
difference from what the README shows, and ``Newcomer.portable`` applies it
to a snippet: the ports in its text, and ``temporal`` CLI calls pointed at the
moved server through ``TEMPORAL_ADDRESS`` (set for that command only, since
``TEMPORAL_ADDRESS`` tells agentsteps it is on a cluster).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
_SCRUBBED = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "AGENTSTEPS_CONFIG",
    "TEMPORAL_ADDRESS",
    "AGENTSTEPS_TASK_QUEUE",
    "AGENTSTEPS_STATE_DIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Newcomer:
    clone: Path
    port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    console_port: int = field(default_factory=free_port)
    dev: subprocess.Popen | None = None
    dev_log: Path | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
        # Drop the test run's own venv from PATH: the newcomer has only what `make demo` made.
        env["PATH"] = os.pathsep.join(
            p for p in env.get("PATH", "").split(os.pathsep) if not (Path(p) / "agentsteps").exists()
        )
        env["AGENTSTEPS_DEV_PORT"] = str(self.port)
        env["AGENTSTEPS_DEV_UI_PORT"] = str(self.ui_port)
        env["AGENTSTEPS_CONSOLE_PORT"] = str(self.console_port)
        return env

    def portable(self, text: str, lang: str = "sh") -> str:
        """The README's text for this machine's ports (module docstring)."""
        text = text.replace("7233", str(self.port)).replace("8233", str(self.ui_port))
        text = text.replace(":9464", f":{self.metrics_port}").replace("8234", str(self.console_port))
        if lang != "sh":
            return text
        # Every `temporal` call of the script, in $(...) too, reaches the moved server; agentsteps does not see it.
        return f'temporal() {{ TEMPORAL_ADDRESS=127.0.0.1:{self.port} command temporal "$@"; }}\n' + text

    def sh(
        self,
        script: str,
        *,
        stdin: str | None = None,
        timeout: float = 300,
        venv: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        prefix = ". .venv/bin/activate\n" if venv else ""
        return subprocess.run(
            ["bash", "-e", "-c", prefix + script],
            cwd=self.clone,
            env={**self.env(), **(extra_env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_dev(self, *, config: str | None = None, timeout: float = 120) -> str:
        """``agentsteps dev`` in the background; returns its banner once the worker polls."""
        self.dev_log = self.clone / "dev-console.log"
        env = self.env()
        if config:
            env["AGENTSTEPS_CONFIG"] = config
        command = (
            f". .venv/bin/activate && exec agentsteps dev --port {self.port} --ui-port {self.ui_port} "
            f"--metrics-port {self.metrics_port} --console-port {self.console_port}"
        )
        log = self.dev_log.open("w")
        self.dev = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.clone,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            banner = self.dev_log.read_text()
            if "Worker polling task queue" in banner:
                return banner
            if self.dev.poll() is not None:
                raise AssertionError(f"agentsteps dev exited with {self.dev.returncode}:\n{banner}")
            time.sleep(0.5)
        raise AssertionError(f"agentsteps dev did not come up within {timeout:g} s:\n{self.dev_log.read_text()}")

    def stop_dev(self, timeout: float = 60) -> int | None:
        if self.dev is None or self.dev.poll() is not None:
            return self.dev.returncode if self.dev else None
        self.dev.send_signal(signal.SIGINT)
        try:
            return self.dev.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.dev.pid, signal.SIGKILL)
            self.dev.wait()
            raise


def fresh_clone(into: Path) -> Path:
    clone = into / "agentsteps"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    return clone


# --- the code blocks of the README and docs/ ---------------------------------------------------------

RUN = {"python", "sh"}
"""Blocks in these languages are executed against the stack; the others are parsed or read."""
PARSED = {"toml", "json", "yaml"}
READ = {"text", "console", "promql"}
_FENCE = re.compile(r"^```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.S | re.M)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<why>[^>]*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str
    not_run: str | None
    """Why this block cannot run here (``<!-- not run: why -->`` on the line before it), else None."""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_blocks(root: Path = ROOT) -> list[Block]:
    """Every fenced block of README.md and docs/*.md, in reading order."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    blocks: list[Block] = []
    for page in pages:
        text = page.read_text()
        for found in _FENCE.finditer(text):
            before = text[: found.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = _NOT_RUN.search(before)
            blocks.append(
                Block(
                    str(page.relative_to(root)),
                    text.count("\n", 0, found.start()) + 1,
                    found["lang"],
                    found["body"],
                    marker["why"] if marker else None,
                )
            )
    return blocks
