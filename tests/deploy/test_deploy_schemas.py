"""Every Kubernetes resource in deploy/ is valid against its API schema, offline.

- Built-in kinds (Deployment, HPA, PDB, ConfigMap): the OpenAPI-derived JSON
  Schemas that the ``kubernetes-validate`` package ships for each Kubernetes
  release, in strict mode (an unknown field is an error, as with
  ``kubectl apply --validate=strict``), for the oldest release we support and
  the newest the package knows.
- KEDA's ``ScaledObject`` and the Prometheus Operator's ``PodMonitor`` and
  ``PrometheusRule``: the ``cloudcoil.models.keda`` and
  ``cloudcoil.models.prometheus_operator`` packages, pydantic models generated
  from those projects' CRD schemas (KEDA 2.16, Prometheus Operator 0.80; the
  Temporal scaler needs KEDA 2.17, whose ScaledObject has the same structure:
  a trigger's type and metadata are free strings in the CRD).
  They ignore unknown keys, so a document must also survive a round trip
  unchanged: a key the CRD does not define is dropped, and the test names it.
- ``Kustomization`` files are build instructions for ``kubectl kustomize``, not
  cluster resources; no schema for them is published on the package indexes.
  ``tests/deploy/test_deploy_manifests.py`` checks what they list.

No network: both packages carry their schemas. The CRD models take seconds to import, so their
tests are not in the fast lane (they import them when they run); the built-in kinds' are.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel, ValidationError

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

# The oldest Kubernetes release the manifests promise to work on (docs/deployment.md), and the newest known here.
OLDEST_KUBERNETES = "1.29.0"
KUBERNETES_RELEASES = [OLDEST_KUBERNETES, kubernetes_validate.latest_version()]

CRD_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
NOT_CLUSTER_RESOURCES = {("kustomize.config.k8s.io/v1beta1", "Kustomization")}


def _documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(DEPLOY.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc:
                found.append((f"{path.relative_to(DEPLOY)}#{index} {doc['kind']}", doc))
    return found


DOCUMENTS = _documents()
BUILT_IN = [(w, d) for w, d in DOCUMENTS if (d["apiVersion"], d["kind"]) not in {*CRD_KINDS, *NOT_CLUSTER_RESOURCES}]
CUSTOM = [(w, d) for w, d in DOCUMENTS if (d["apiVersion"], d["kind"]) in CRD_KINDS]


def kubernetes_problem(doc: dict[str, Any], release: str) -> str | None:
    try:
        kubernetes_validate.validate(doc, release, strict=True)
    except kubernetes_validate.SchemaNotFoundError as exc:
        return f"no Kubernetes {release} schema for {doc['apiVersion']} {doc['kind']}: {exc}"
    except kubernetes_validate.ValidationError as exc:
        return f"invalid for Kubernetes {release}: {exc}"
    return None


def _dropped(sent: Any, kept: Any, path: str = "$") -> list[str]:
    if isinstance(sent, dict):
        kept = kept if isinstance(kept, dict) else {}
        return [
            p
            for k, v in sent.items()
            for p in ([f"{path}.{k}"] if k not in kept else _dropped(v, kept[k], f"{path}.{k}"))
        ]
    if isinstance(sent, list) and isinstance(kept, list):
        return [p for i, (s, k) in enumerate(zip(sent, kept)) for p in _dropped(s, k, f"{path}[{i}]")]
    return [] if sent == kept else [f"{path} (became {kept!r})"]


@functools.cache
def crd_models() -> dict[tuple[str, str], type[BaseModel]]:
    from cloudcoil.models.keda.v1alpha1 import ScaledObject
    from cloudcoil.models.prometheus_operator.v1 import PodMonitor, PrometheusRule

    models: dict[tuple[str, str], type[BaseModel]] = {
        ("keda.sh/v1alpha1", "ScaledObject"): ScaledObject,
        ("monitoring.coreos.com/v1", "PodMonitor"): PodMonitor,
        ("monitoring.coreos.com/v1", "PrometheusRule"): PrometheusRule,
    }
    assert set(models) == CRD_KINDS
    return models


def crd_problem(doc: dict[str, Any]) -> str | None:
    model = crd_models()[(doc["apiVersion"], doc["kind"])]
    try:
        parsed = model.model_validate(doc)
    except ValidationError as exc:
        return f"invalid against the {doc['kind']} CRD: {exc}"
    dropped = _dropped(doc, parsed.model_dump(by_alias=True, exclude_unset=True, mode="json"))
    return f"not fields of the {doc['kind']} CRD: {', '.join(dropped)}" if dropped else None


@pytest.mark.fast
def test_every_document_is_a_kind_this_file_knows_how_to_check():
    assert BUILT_IN and CUSTOM
    kinds = {d["kind"] for _, d in DOCUMENTS}
    assert {
        "Deployment",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "ConfigMap",
        "ScaledObject",
        "PodMonitor",
        "PrometheusRule",
    } <= kinds


@pytest.mark.fast
@pytest.mark.parametrize("release", KUBERNETES_RELEASES)
@pytest.mark.parametrize("where, doc", BUILT_IN, ids=[w for w, _ in BUILT_IN])
def test_built_in_resources_are_valid_for_each_supported_kubernetes_release(where, doc, release):
    assert kubernetes_problem(doc, release) is None, f"{where}: {kubernetes_problem(doc, release)}"


@pytest.mark.parametrize("where, doc", CUSTOM, ids=[w for w, _ in CUSTOM])
def test_keda_and_prometheus_operator_resources_are_valid_against_their_crds(where, doc):
    assert crd_problem(doc) is None, f"{where}: {crd_problem(doc)}"


def _one(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(d for _, d in DOCUMENTS if d["kind"] == kind))


@pytest.mark.fast
def test_the_kubernetes_check_refuses_a_misspelt_field_a_wrong_type_and_a_removed_api():
    misspelt = _one("Deployment")
    misspelt["spec"]["replica"] = 3
    wrong_type = _one("Deployment")
    wrong_type["spec"]["template"]["spec"]["containers"][0]["ports"] = "9464"
    removed_api = _one("HorizontalPodAutoscaler")
    removed_api["apiVersion"] = "autoscaling/v2beta2"  # gone since Kubernetes 1.26

    for doc in (misspelt, wrong_type, removed_api):
        assert kubernetes_problem(doc, kubernetes_validate.latest_version()) is not None


def test_the_crd_check_refuses_an_unknown_key_a_wrong_type_and_a_missing_required_field():
    unknown = _one("ScaledObject")
    unknown["spec"]["minReplicaCoutn"] = 2
    wrong_type = _one("ScaledObject")
    wrong_type["spec"]["minReplicaCount"] = "two"
    missing = _one("ScaledObject")
    del missing["spec"]["scaleTargetRef"]
    nested_unknown = _one("PrometheusRule")
    nested_unknown["spec"]["groups"][0]["rules"][0]["expresion"] = "up"

    assert "$.spec.minReplicaCoutn" in (crd_problem(unknown) or "")
    assert "$.spec.groups[0].rules[0].expresion" in (crd_problem(nested_unknown) or "")
    for doc in (wrong_type, missing):
        assert crd_problem(doc) is not None
