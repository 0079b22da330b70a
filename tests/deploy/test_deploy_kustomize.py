"""`kubectl kustomize` builds each Kubernetes variant of deploy/ with exactly one autoscaler.

A child process (kubectl), so not in the fast lane; tests/deploy/test_deploy_manifests.py checks the same
files structurally there.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.mark.parametrize("directory, autoscaler", [("k8s", "HorizontalPodAutoscaler"), ("k8s-keda", "ScaledObject")])
def test_kustomize_builds_each_variant_with_exactly_one_autoscaler(directory, autoscaler):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed; test_deploy_manifests.py's structural tests still ran")
    done = subprocess.run([kubectl, "kustomize", str(DEPLOY / directory)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]
    assert {"HorizontalPodAutoscaler", "ScaledObject"} & set(kinds) == {autoscaler}
    assert {"Deployment", "PodDisruptionBudget", "PodMonitor", "PrometheusRule", "ConfigMap"} <= set(kinds)
