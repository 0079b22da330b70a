"""deploy/ parses and refers only to things that exist.

Compose and Kubernetes files are YAML-parsed and cross-checked against the
code: the image, the metrics port and path, the probe paths the metrics
server serves, the CLI command the container runs, and the environment
variable names ``client/settings.py`` reads. No secret value may sit in the repository.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentsteps.client.settings import _ENV_FIELDS
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.telemetry.server import HEALTH_PATH, METRICS_PATH, READY_PATH

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
IMAGE = "agentsteps-worker:0.1.0"
METRICS_PORT = WorkerSettings().metrics_port
ENV_THE_CODE_READS = set(_ENV_FIELDS) | {"AGENTSTEPS_CONFIG"}
SECRET_NAMES = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def k8s() -> dict[str, dict]:
    docs = [d for f in sorted((DEPLOY / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    return {d["kind"]: d for d in docs}


def test_compose_runs_temporal_on_postgresql_with_ui_worker_prometheus_and_grafana(compose):
    services = compose["services"]
    assert set(services) == {"postgresql", "temporal", "temporal-ui", "worker", "prometheus", "grafana"}
    assert services["temporal"]["environment"]["DB"] == "postgres12"
    assert services["temporal"]["environment"]["POSTGRES_SEEDS"] == "postgresql"
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert services["worker"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    for name, service in services.items():
        assert ":" in service["image"] and not service["image"].endswith(":latest"), f"{name} image is not pinned"


def test_compose_worker_builds_the_dockerfile_and_exposes_the_metrics_port(compose):
    worker = compose["services"]["worker"]
    assert (DEPLOY / worker["build"]["context"] / worker["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    assert worker["image"] == IMAGE
    assert f"{METRICS_PORT}:{METRICS_PORT}" in worker["ports"]
    assert int(worker["environment"]["AGENTSTEPS_METRICS_PORT"]) == METRICS_PORT
    assert set(worker["environment"]) <= ENV_THE_CODE_READS


def test_compose_mounts_only_files_that_exist(compose):
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts missing {source}"


def test_compose_secrets_come_from_the_environment_not_the_file(compose):
    env = compose["services"]["worker"]["environment"]
    for name in SECRET_NAMES:
        assert re.fullmatch(r"\$\{" + name + r":-\}", env[name]), env[name]


def test_compose_prometheus_scrapes_the_worker_service_on_the_metrics_path(compose):
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["job_name"] == "agentsteps-worker"
    assert job["metrics_path"] == METRICS_PATH
    assert job["static_configs"][0]["targets"] == [f"worker:{METRICS_PORT}"]
    assert "worker" in compose["services"]


def test_grafana_provisioning_points_at_the_dashboard_and_its_datasource(compose):
    grafana = compose["services"]["grafana"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"])
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/agentsteps.yml").read_text())
    dashboards_path = provider["providers"][0]["options"]["path"]
    host_dir = next(src for src, dst in mounts.items() if dst == dashboards_path)
    dashboard = json.loads((DEPLOY / host_dir / "agentsteps.json").read_text())
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    (source,) = datasource["datasources"]
    assert source["url"] == "http://prometheus:9090" and "prometheus" in compose["services"]
    uids = {p["datasource"]["uid"] for p in dashboard["panels"] if p["type"] != "row"}
    assert uids == {source["uid"]}


def test_dockerfile_runs_the_worker_command_the_cli_has():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (.+)$", dockerfile, re.M).group(1))
    command = json.loads(re.search(r"^CMD (.+)$", dockerfile, re.M).group(1))
    assert entrypoint == ["agentsteps"] and command == ["worker"]
    assert f"EXPOSE {METRICS_PORT}" in dockerfile
    assert HEALTH_PATH in dockerfile
    script = Path(sys.executable).parent / "agentsteps"
    done = subprocess.run([str(script), *command, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_k8s_worker_deployment_probes_scrape_annotations_and_resources(k8s):
    deployment = k8s["Deployment"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == IMAGE
    assert container["args"] == ["worker"]
    (port,) = container["ports"]
    assert port["containerPort"] == METRICS_PORT
    assert container["livenessProbe"]["httpGet"] == {"path": HEALTH_PATH, "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": READY_PATH, "port": port["name"]}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    annotations = pod["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(METRICS_PORT),
        "prometheus.io/path": METRICS_PATH,
    }


def test_k8s_env_names_are_the_ones_the_code_reads_and_secrets_are_references(k8s):
    deployment, configmap = k8s["Deployment"], k8s["ConfigMap"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["envFrom"] == [{"configMapRef": {"name": configmap["metadata"]["name"]}}]
    assert set(configmap["data"]) <= ENV_THE_CODE_READS
    assert int(configmap["data"]["AGENTSTEPS_METRICS_PORT"]) == METRICS_PORT
    names = {e["name"] for e in container["env"]}
    assert names <= ENV_THE_CODE_READS
    for entry in container["env"]:
        if entry["name"] in SECRET_NAMES:
            assert set(entry) == {"name", "valueFrom"} and "secretKeyRef" in entry["valueFrom"]
    assert SECRET_NAMES <= names
    assert "Secret" not in k8s, "secret values never live in the repository"


def test_k8s_autoscaler_and_pod_monitor_target_the_worker(k8s):
    deployment = k8s["Deployment"]
    hpa = k8s["HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": deployment["metadata"]["name"]}
    assert hpa["spec"]["minReplicas"] >= 1 < hpa["spec"]["maxReplicas"]
    monitor = k8s["PodMonitor"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # The job label becomes "agentsteps-worker", which the alerts and dashboard query.
    assert pod_labels[monitor["spec"]["jobLabel"]] == "agentsteps-worker"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == METRICS_PATH and endpoint["port"] == "metrics"


def test_k8s_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    manifests = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests


def test_no_secret_values_anywhere_in_deploy():
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not re.search(r"sk-[A-Za-z0-9]{16,}", text), path
            assert not re.search(r"(API_KEY|apiKey)\s*[:=]\s*['\"]?[A-Za-z0-9]{12,}", text), path
