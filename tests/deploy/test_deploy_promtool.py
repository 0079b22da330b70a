"""promtool accepts the scrape config and the alert rules, and the rules' unit tests pass.

promtool comes with Debian's ``prometheus`` package, which ``.ci/run``
installs. Under CI (``CI`` set) a missing promtool fails these tests; on a
developer machine without it they are skipped, and the skip says why.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from prometheus_support import prometheus_tool

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def run_promtool(*args: str) -> str:
    done = subprocess.run(
        [prometheus_tool("promtool"), *args], cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def test_promtool_accepts_the_scrape_config_and_its_rule_files():
    output = run_promtool("check", "config", "prometheus.yml")
    assert "SUCCESS: prometheus.yml is valid" in output
    assert "SUCCESS: 1 rule files found" in output


def _rules() -> list[dict]:
    import yaml

    return [
        rule
        for group in yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"]
        for rule in group["rules"]
    ]


def test_promtool_accepts_every_alert_rule():
    output = run_promtool("check", "rules", "alerts.yml")
    assert f"SUCCESS: {len(_rules())} rules found" in output


def test_alert_rule_unit_tests_pass():
    output = run_promtool("test", "rules", "alerts_test.yml")
    assert "SUCCESS" in output


def test_every_alert_has_a_unit_test_that_fires_it_and_one_where_it_stays_quiet():
    import yaml

    alerts = {rule["alert"] for rule in _rules()}
    tests = yaml.safe_load((PROMETHEUS_DIR / "alerts_test.yml").read_text())
    cases = [case for test in tests["tests"] for case in test.get("alert_rule_test", [])]
    fired = {case["alertname"] for case in cases if case.get("exp_alerts")}
    quiet = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    assert alerts == fired
    assert alerts == quiet


def test_every_alert_says_how_long_how_bad_what_and_where_its_runbook_is():
    runbooks = (PROMETHEUS_DIR.parents[1] / "docs" / "runbooks.md").read_text()
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', runbooks))
    for rule in _rules():
        assert "for" in rule, rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        path, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert path == "docs/runbooks.md" and anchor in anchors, rule["alert"]
        # The runbook section is about this alert: its heading names it.
        section = runbooks.split(f'<a id="{anchor}"></a>', 1)[1].split("<a id=", 1)[0]
        assert rule["alert"] in section.splitlines()[1], rule["alert"]


def test_alerts_test_yml_is_what_its_builder_writes():
    """The scenarios live in build_alerts_test.py; the YAML is its output (buckets and annotations imported)."""
    import sys

    done = subprocess.run(
        [sys.executable, str(PROMETHEUS_DIR / "build_alerts_test.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PROMETHEUS_DIR / "alerts_test.yml").read_text(), "run build_alerts_test.py again"
