"""promtool accepts the scrape config and the alert rules, and the rules' unit tests pass.

promtool comes with Debian's ``prometheus`` package, which ``.ci/run``
installs. Under CI (``CI`` set) a missing promtool fails these tests; on a
developer machine without it they are skipped, and the skip says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PROMETHEUS_DIR = Path(__file__).resolve().parents[1] / "deploy" / "prometheus"


def promtool() -> str:
    found = shutil.which("promtool")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("promtool is not installed; .ci/run installs Debian's prometheus package")
    pytest.skip("promtool not installed (apt-get install prometheus); CI fails instead of skipping")


def run_promtool(*args: str) -> str:
    done = subprocess.run([promtool(), *args], cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_promtool_accepts_the_scrape_config_and_its_rule_files():
    output = run_promtool("check", "config", "prometheus.yml")
    assert "SUCCESS: prometheus.yml is valid" in output
    assert "SUCCESS: 1 rule files found" in output


def test_promtool_accepts_every_alert_rule():
    output = run_promtool("check", "rules", "alerts.yml")
    assert "SUCCESS: 6 rules found" in output


def test_alert_rule_unit_tests_pass():
    output = run_promtool("test", "rules", "alerts_test.yml")
    assert "SUCCESS" in output


def test_every_alert_has_a_unit_test_that_fires_it():
    import yaml

    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    tests = yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yml").read_text())
    fired = {
        case["alertname"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts == fired
