"""deploy/ parses and refers only to things that exist.

Compose and Kubernetes files are YAML-parsed and cross-checked against the
code: the image, the metrics port and path, the probe paths the metrics
server serves, the CLI command the container runs, and the environment
variable names ``client/settings.py`` reads. No secret value may sit in the repository.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from agentsteps.cli.main import _parser as cli_parser
from agentsteps.client.settings import _ENV_FIELDS, load_settings
from agentsteps.contracts.code.program import ProgramLimits
from agentsteps.contracts.config.settings import WorkerSettings
from agentsteps.contracts.errors import DeploymentConfigError, InvalidSpecError
from agentsteps.telemetry.server import HEALTH_PATH, METRICS_PATH, READY_PATH
from agentsteps.worker import check_deployment

pytestmark = pytest.mark.fast  # pure and quick: in `make test-fast`

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
IMAGE = f"agentsteps-worker:{tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['version']}"
METRICS_PORT = WorkerSettings().metrics_port
COMPOSE_CONFIG = DEPLOY / "config" / "agentsteps.toml"
# Settings the loader reads, plus the secrets the compose config file names ("secret:NAME").
ENV_THE_CODE_READS = (
    set(_ENV_FIELDS) | {"AGENTSTEPS_CONFIG"} | set(re.findall(r"secret:([A-Z_]+)", COMPOSE_CONFIG.read_text()))
)
SECRET_NAMES = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TICKETS_API_TOKEN"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def k8s() -> dict[str, dict]:
    docs = [d for f in sorted((DEPLOY / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    return {d["kind"]: d for d in docs}


def test_compose_runs_temporal_on_postgresql_with_ui_worker_prometheus_and_grafana(compose):
    services = compose["services"]
    assert set(services) == {
        "postgresql",
        "temporal",
        "temporal-ui",
        "worker",
        "worker-extra",
        "minio",
        "minio-setup",
        "tickets",
        "prometheus",
        "grafana",
        "console",
    }
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


def test_compose_gives_a_stopping_worker_its_drain_and_stop_deadline_before_sigkill(compose):
    from agentsteps.cli.hard_stop import STOP_MARGIN_SECONDS
    from agentsteps.contracts.config.settings import WorkerSettings

    drain = WorkerSettings().graceful_shutdown_seconds  # the compose config leaves it at its default
    for name in ("worker", "worker-extra"):
        grace = compose["services"][name]["stop_grace_period"]
        assert grace.endswith("s") and drain + STOP_MARGIN_SECONDS < int(grace[:-1]), (name, grace)


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
    # No default for the snapshot key: compose refuses to start until the operator sets one.
    assert env["AGENTSTEPS_SNAPSHOT_KEY"].startswith("${AGENTSTEPS_SNAPSHOT_KEY:?")


def _compose_worker_settings(compose, service: str) -> WorkerSettings:
    """What the worker container loads: its environment (with the operator's key) and the mounted config."""
    env = dict(compose["services"][service]["environment"])
    env = {k: re.sub(r"\$\{[A-Z_]+:[-?]([^}]*)\}", r"\1", str(v)) for k, v in env.items()}
    env["AGENTSTEPS_SNAPSHOT_KEY"] = "operator-set-key-0123456789abcdef"
    mounts = dict(v.split(":")[:2] for v in compose["services"][service]["volumes"])
    assert mounts["./config/agentsteps.toml"] == env.pop("AGENTSTEPS_CONFIG")
    return load_settings(COMPOSE_CONFIG, env)


def test_compose_workers_share_minio_and_one_key_and_would_start(compose):
    for service in ("worker", "worker-extra"):
        settings = _compose_worker_settings(compose, service)
        check_deployment(settings)  # the refusal a worker without shared store and key would hit
        assert settings.temporal_address == "temporal:7233" and not settings.single_worker
        store = settings.payload_store
        assert store.s3_endpoint_url == "http://minio:9000" and store.s3_access_key_id is not None
        assert settings.tool_factories == [], "a production worker offers no demo tools"
    setup = " ".join(compose["services"]["minio-setup"]["command"])
    assert f"mb --ignore-existing store/{settings.payload_store.s3_bucket}" in setup
    assert compose["services"]["worker"]["depends_on"]["minio-setup"] == {"condition": "service_completed_successfully"}


def test_compose_wires_the_ticket_tracker_the_monitor_reads(compose):
    from agentsteps.client.settings import load_mcp_config

    tickets = compose["services"]["tickets"]
    assert tickets["entrypoint"][-1] == "agentsteps.examples.tickets"
    port = tickets["command"][tickets["command"].index("--port") + 1]
    server = load_mcp_config(COMPOSE_CONFIG).servers["tickets"]
    assert server.url == f"http://tickets:{port}/mcp"
    assert tickets["environment"]["TICKETS_EXPECTED_TOKEN"] == "${TICKETS_API_TOKEN:-}"


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
    # The panels name no datasource uid: the dashboard's `datasource` variable defaults to the default Prometheus.
    assert source["type"] == "prometheus" and source["isDefault"] is True
    uids = {p["datasource"]["uid"] for p in dashboard["panels"] if p["type"] != "row"}
    assert uids == {"${datasource}"}


def test_dockerfile_runs_the_worker_command_the_cli_has():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (.+)$", dockerfile, re.M).group(1))
    command = json.loads(re.search(r"^CMD (.+)$", dockerfile, re.M).group(1))
    assert entrypoint == ["agentsteps"] and command == ["worker"]
    assert f"EXPOSE {METRICS_PORT}" in dockerfile
    assert HEALTH_PATH in dockerfile
    # The CLI's own parser, in process (tests/e2e/test_wheel_install.py runs the installed script).
    with pytest.raises(SystemExit) as exited, contextlib.redirect_stdout(io.StringIO()):
        cli_parser().parse_args([*command, "--help"])
    assert exited.value.code == 0


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
    secret_names = SECRET_NAMES - {"TICKETS_API_TOKEN"} | {
        "AGENTSTEPS_SNAPSHOT_KEY",
        "AGENTSTEPS_SNAPSHOT_PREVIOUS_KEYS",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    }
    for entry in container["env"]:
        if entry["name"] in secret_names:
            assert set(entry) == {"name", "valueFrom"} and "secretKeyRef" in entry["valueFrom"]
    assert secret_names <= names
    assert "Secret" not in k8s, "secret values never live in the repository"


def _k8s_env(k8s, *, with_optional_secrets: bool = False) -> dict[str, str]:
    """The pod's environment as Kubernetes would build it: ConfigMap, literal values, Secrets, the downward API."""
    (container,) = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = dict(k8s["ConfigMap"]["data"])
    for entry in container["env"]:
        source = entry.get("valueFrom", {})
        if "secretKeyRef" in source:
            optional = source["secretKeyRef"].get("optional")
            env[entry["name"]] = "k" * 32 if with_optional_secrets or not optional else ""
        elif "resourceFieldRef" in source:
            ref = source["resourceFieldRef"]
            assert ref["containerName"] == container["name"]
            section, _, resource = ref["resource"].partition(".")
            quantity = _quantity(container["resources"][section][resource])
            env[entry["name"]] = str(math.ceil(quantity / _quantity(ref.get("divisor", "1"))))  # k8s rounds up
        else:
            env[entry["name"]] = entry.get("value", "")
    return env


def _k8s_worker_settings(k8s) -> WorkerSettings:
    return load_settings(None, _k8s_env(k8s))


def test_k8s_replicas_share_an_s3_store_and_a_key_from_a_secret_and_would_start(k8s):
    (container,) = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    key = next(e for e in container["env"] if e["name"] == "AGENTSTEPS_SNAPSHOT_KEY")
    assert not key["valueFrom"]["secretKeyRef"].get("optional"), "a pod without the key must not start"
    settings = _k8s_worker_settings(k8s)
    check_deployment(settings)
    assert settings.payload_store.shared and settings.snapshot_key is not None and not settings.single_worker
    assert k8s["HorizontalPodAutoscaler"]["spec"]["minReplicas"] >= 2
    # The autoscaler owns the replica count; a fixed one would be reapplied and fight it.
    assert "replicas" not in k8s["Deployment"]["spec"]


def test_k8s_emptydirs_hold_only_scratch(k8s):
    pod = k8s["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    settings = _k8s_worker_settings(k8s)
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    for volume in pod["volumes"]:
        assert set(volume) == {"name", "emptyDir"}, "no other volume kinds"
        assert mounts[volume["name"]] in {str(settings.state_dir), "/tmp"}
    # What used to live in the state dir lives elsewhere: payloads in S3, the key in a Secret,
    # and a production worker registers no demo tools (whose ledger was a file there).
    assert settings.payload_store.s3_bucket and settings.snapshot_key is not None


def _quantity(value: str) -> float:
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if str(value).endswith(suffix):
            return float(str(value)[: -len(suffix)]) * factor
    return float(value)


def test_k8s_resources_match_the_sandbox_pool_size(k8s):
    (container,) = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    processes = _k8s_worker_settings(k8s).sandbox_processes
    assert processes is not None, "unset means the node's CPU count, not the pod's"
    limits = container["resources"]["limits"]
    assert _quantity(limits["cpu"]) >= processes
    assert _quantity(limits["memory"]) >= processes * ProgramLimits().memory_bytes + 512 * 2**20


def test_dockerignore_keeps_state_keys_venvs_and_git_out_of_images():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        parts = path.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        return any(_docker_match(p, c) for p in patterns for c in candidates)

    for path in (
        ".git/config",
        ".venv/bin/python",
        ".agentsteps/snapshot.key",
        ".agentsteps/temporal.db",
        "examples/.agentsteps/payloads/sha256/ab/x",
        "snapshot.key",
        "deploy/k8s/x.pem",
        ".env",
        "agentsteps.toml",
        "tickets.db",
        "activities/__pycache__/x.pyc",
        "agentsteps.egg-info/PKG-INFO",
    ):
        assert ignored(path), path
    for path in (
        "pyproject.toml",
        "README.md",
        "worker.py",
        "storage/payload_store.py",
        "scripted_model/scripts/demo.json",
        "examples/demo_agent.toml",
        "deploy/config/agentsteps.toml",
    ):
        assert not ignored(path), path


def _docker_match(pattern: str, path: str) -> bool:
    regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
    return re.fullmatch(regex, path) is not None


def test_every_file_deploy_mentions_exists():
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.suffix in {".yml", ".yaml", ".toml", ""}:
            for mention in re.findall(
                r"(?<![\w/.-])((?:deploy/)?[\w-]+(?:/[\w.-]+)*\.(?:ya?ml|toml|json))\b", path.read_text()
            ):
                candidates = [ROOT / mention, DEPLOY / mention, path.parent / mention]
                assert any(c.exists() for c in candidates), f"{path.relative_to(ROOT)} mentions missing {mention}"


def test_k8s_autoscaler_and_pod_monitor_target_the_worker(k8s):
    deployment = k8s["Deployment"]
    hpa = k8s["HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
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
        if path.is_file() and "__pycache__" not in path.parts:  # bytecode of deploy/grafana's builder
            text = path.read_text()
            assert not re.search(r"sk-[A-Za-z0-9]{16,}", text), path
            assert not re.search(r"(API_KEY|apiKey)\s*[:=]\s*['\"]?[A-Za-z0-9]{12,}", text), path


# --- operability: graceful stop, sizing, keys, scraping, rules, disruptions, autoscaling ---


def test_k8s_grace_period_outlasts_the_stop_deadline_whose_drain_outlasts_an_llm_call(k8s):
    from agentsteps.cli.hard_stop import STOP_MARGIN_SECONDS
    from agentsteps.contracts.spec import ActivityPolicy

    settings = _k8s_worker_settings(k8s)
    grace = k8s["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert ActivityPolicy().start_to_close_seconds < settings.graceful_shutdown_seconds
    # A stuck shutdown ends itself, with its log line, before the kubelet's SIGKILL.
    assert settings.graceful_shutdown_seconds + STOP_MARGIN_SECONDS < grace


def test_k8s_slots_cache_and_sandbox_pool_are_sized_from_the_pod(k8s):
    (container,) = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    entry = next(e for e in container["env"] if e["name"] == "AGENTSTEPS_SANDBOX_PROCESSES")
    assert entry["valueFrom"]["resourceFieldRef"]["resource"] == "limits.cpu"
    settings = _k8s_worker_settings(k8s)
    assert settings.sandbox_processes == math.ceil(_quantity(container["resources"]["limits"]["cpu"]))
    for value in (
        settings.max_concurrent_activities,
        settings.max_concurrent_workflow_tasks,
        settings.max_cached_workflows,
    ):
        assert value is not None, "unset means the SDK's defaults, sized for no pod in particular"
    # Not more activity slots than kept-alive provider connections.
    assert settings.max_concurrent_activities <= 100


def test_k8s_a_pod_without_its_required_provider_key_does_not_start(k8s):
    (container,) = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    settings = _k8s_worker_settings(k8s)
    assert settings.required_providers, "declare the providers the deployment needs"
    env_of = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
    for provider in settings.required_providers:
        entry = next(e for e in container["env"] if e["name"] == env_of[provider])
        assert not entry["valueFrom"]["secretKeyRef"].get("optional"), f"{provider}'s key must be required"
    check_deployment(settings)  # with the Secret present, the worker starts
    env = _k8s_env(k8s)
    for provider in settings.required_providers:
        env[env_of[provider]] = ""
    with pytest.raises(DeploymentConfigError, match="OPENAI_API_KEY"):
        check_deployment(load_settings(None, env))


def test_hostile_required_providers_are_a_config_error():
    for bad in ("openai,mistral", "OPENAI", "openai;rm -rf /"):
        with pytest.raises(InvalidSpecError, match="required_providers"):
            load_settings(None, {"AGENTSTEPS_REQUIRED_PROVIDERS": bad})


def test_k8s_pod_monitor_is_selected_by_kube_prometheus_stack_and_keeps_temporal_namespace(k8s):
    monitor = k8s["PodMonitor"]
    assert "release" in monitor["metadata"]["labels"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    # The pod's namespace leaves `namespace` before the scrape, so Temporal's arrives unrenamed.
    assert endpoint["relabelings"] == [
        {"action": "replace", "sourceLabels": ["namespace"], "targetLabel": "kubernetes_namespace"},
        {"action": "labeldrop", "regex": "namespace"},
    ]
    assert "metricRelabelings" not in endpoint
    assert not endpoint.get("honorLabels"), "honorLabels would let any scraped label overwrite the target's"


def test_k8s_prometheus_rule_carries_exactly_the_alert_rules(k8s):
    rule = k8s["PrometheusRule"]
    alerts = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    assert rule["spec"]["groups"] == alerts["groups"], "copy alerts.yml's groups into prometheusrule.yaml"
    assert rule["metadata"]["labels"]["release"] == k8s["PodMonitor"]["metadata"]["labels"]["release"]


def test_k8s_disruption_budget_keeps_workers_polling_through_drains(k8s):
    pdb = k8s["PodDisruptionBudget"]
    pod_labels = k8s["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
    assert k8s["HorizontalPodAutoscaler"]["spec"]["minReplicas"] > pdb["spec"]["maxUnavailable"]


def test_keda_overlay_scales_on_the_task_queue_backlog_instead_of_the_cpu_hpa(k8s):
    overlay = yaml.safe_load((DEPLOY / "k8s-keda" / "kustomization.yaml").read_text())
    assert "../k8s" in overlay["resources"] and "scaledobject.yaml" in overlay["resources"]
    (patch,) = overlay["patches"]
    deleted = yaml.safe_load(patch["patch"])
    assert deleted["$patch"] == "delete" and deleted["kind"] == "HorizontalPodAutoscaler"
    assert deleted["metadata"]["name"] == k8s["HorizontalPodAutoscaler"]["metadata"]["name"]
    scaled = yaml.safe_load((DEPLOY / "k8s-keda" / "scaledobject.yaml").read_text())
    assert scaled["spec"]["scaleTargetRef"]["name"] == k8s["Deployment"]["metadata"]["name"]
    triggers = {t["type"]: t for t in scaled["spec"]["triggers"]}
    temporal, config = triggers["temporal"]["metadata"], k8s["ConfigMap"]["data"]
    assert temporal["endpoint"] == config["TEMPORAL_ADDRESS"]
    assert temporal["namespace"] == config["TEMPORAL_NAMESPACE"]
    assert temporal["taskQueue"] == config["AGENTSTEPS_TASK_QUEUE"]
    assert "cpu" in triggers, "CPU stays as the fallback signal"
    assert scaled["spec"]["minReplicaCount"] > k8s["PodDisruptionBudget"]["spec"]["maxUnavailable"]
