"""The console in deploy/: compose and Kubernetes run it as a client with its auth settings, and it would start."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from agentsteps.client.settings import _ENV_FIELDS, load_settings
from agentsteps.console import check_binding

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CONSOLE_PORT = 8234


def test_compose_serves_the_console_on_the_hosts_loopback_and_needs_a_token():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    console = compose["services"]["console"]
    assert console["image"] == compose["services"]["worker"]["image"] and console["command"] == ["console"]
    assert console["ports"] == [f"127.0.0.1:{CONSOLE_PORT}:{CONSOLE_PORT}"]
    env = console["environment"]
    assert set(env) - {"AGENTSTEPS_CONFIG"} <= set(_ENV_FIELDS)
    assert env["AGENTSTEPS_CONSOLE_TOKEN"].startswith("${AGENTSTEPS_CONSOLE_TOKEN:?"), (
        "compose refuses to start without it"
    )
    assert f"127.0.0.1:{CONSOLE_PORT}/healthz" in " ".join(console["healthcheck"]["test"])

    resolved = {k: re.sub(r"\$\{[A-Z_]+:[-?]([^}]*)\}", r"\1", str(v)) for k, v in env.items()}
    resolved["AGENTSTEPS_CONSOLE_TOKEN"] = "operator-set-token"
    resolved.pop("AGENTSTEPS_CONFIG")
    settings = load_settings(DEPLOY / "config" / "agentsteps.toml", resolved)
    check_binding(settings.console)  # bound to 0.0.0.0 in the container, with the token: it starts
    assert settings.console.host == "0.0.0.0" and settings.console.port == CONSOLE_PORT
    assert settings.payload_store.s3_bucket  # it reads large payloads as the workers do


def test_k8s_runs_the_console_as_a_client_with_a_token_from_a_secret_or_an_auth_proxy():
    docs = {f.name: list(yaml.safe_load_all(f.read_text())) for f in (DEPLOY / "k8s").glob("console-*.yaml")}
    (deployment,) = docs["console-deployment.yaml"]
    (service,) = docs["console-service.yaml"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["console"] and container["ports"][0]["containerPort"] == CONSOLE_PORT
    assert container["envFrom"] == [{"configMapRef": {"name": "agentsteps-worker"}}]  # the same Temporal and store
    names = {e["name"] for e in container["env"]}
    assert names <= set(_ENV_FIELDS)
    token = next(e for e in container["env"] if e["name"] == "AGENTSTEPS_CONSOLE_TOKEN")
    assert set(token) == {"name", "valueFrom"} and "secretKeyRef" in token["valueFrom"]
    assert "AGENTSTEPS_CONSOLE_PROXY_USER_HEADER" in names
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert "type" not in service["spec"], "a ClusterIP: exposed only through the deployment's ingress and auth proxy"

    configmap = yaml.safe_load((DEPLOY / "k8s" / "configmap.yaml").read_text())
    env = dict(configmap["data"])
    env.update({e["name"]: e.get("value", "") for e in container["env"] if "value" in e})
    env["AGENTSTEPS_CONSOLE_TOKEN"] = "from-the-secret"
    settings = load_settings(None, {k: v for k, v in env.items() if v})
    check_binding(settings.console)
    assert settings.temporal_address and settings.payload_store.shared

    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    assert {"console-deployment.yaml", "console-service.yaml"} <= set(kustomization["resources"])


def test_the_grafana_links_name_the_dashboard_deploy_ships():
    import json

    from agentsteps.console.present import GRAFANA_DASHBOARD

    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "agentsteps.json").read_text())
    assert dashboard["uid"] == GRAFANA_DASHBOARD
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"namespace", "model"} <= variables  # the link's var-namespace and var-model
