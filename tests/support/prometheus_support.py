"""A real Prometheus (Debian's package; ``.ci/run`` installs it) scraping test workers every second."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml
from mcp_support import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRAPE_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"


def prometheus_tool(name: str) -> str:
    """``prometheus`` or ``promtool``, both from Debian's prometheus package."""
    found = shutil.which(name)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{name} is not installed; .ci/run installs Debian's prometheus package")
    pytest.skip(f"{name} not installed (apt-get install prometheus); CI fails instead of skipping")


class Prometheus:
    """deploy/prometheus/prometheus.yml with only the targets, a 1 s interval, rules and storage changed."""

    def __init__(self, targets: list[str], workdir: Path, rule_files: list[Path] = ()) -> None:
        config = yaml.safe_load(SCRAPE_CONFIG.read_text())
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(f) for f in rule_files]
        config["scrape_configs"][0]["static_configs"] = [{"targets": targets}]
        config["scrape_configs"][0].pop("dns_sd_configs", None)
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                prometheus_tool("prometheus"),
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "prometheus exited; see prometheus.log"
            try:
                if self.http.get("/-/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus never became ready")

    def query(self, expr: str) -> list[dict]:
        body = self.http.get("/api/v1/query", params={"query": expr}).json()
        assert body["status"] == "success", f"{expr}: {body.get('error')}"
        return body["data"]["result"]

    def wait_for(self, expr: str, predicate, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result and predicate(float(result[0]["value"][1])):
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting on {expr}: {self.query(expr)}")

    def stop(self) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


GRAFANA_DEFAULTS = {
    "$__rate_interval": "1m",
    "$job": "agentsteps-worker",
    "$instance": ".*",
    "$namespace": "default",
    "$task_queue": ".*",
    "$provider": ".*",
    "$model": ".*",
    "$tool": ".*",
    "$mcp_server": ".*",
    "$quota": ".*",
    "$tenant": ".*",
}


def as_grafana_sends(expr: str, **chosen: str) -> str:
    """A dashboard query with the variables filled in as Grafana does for the defaults (All = ``.*``), or ``chosen``."""
    for name, default in GRAFANA_DEFAULTS.items():
        expr = expr.replace(name, chosen.get(name.lstrip("$"), default))
    assert "$" not in expr, expr
    return expr


def dashboard_query(title: str, ref: int = 0) -> str:
    """The query of a panel of deploy/grafana/dashboards/agentsteps.json, as written there."""
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "agentsteps.json").read_text())
    (panel,) = [p for p in dashboard["panels"] if p["title"] == title]
    return panel["targets"][ref]["expr"]
