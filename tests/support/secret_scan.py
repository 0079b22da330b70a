"""The one secret scanner every secret test uses: it looks where a secret could really be.

``history.to_json()`` keeps payload data base64-encoded, so searching it for a
secret sees nothing inside any payload. This decodes every payload of every
event (inputs, results, failures and their details, memo, search attributes,
headers) before searching, and also reads the places a secret could be
written outside history: the payload-store directory and a Temporal database
file (raw bytes), worker logs, the ``/metrics`` exposition (labels and
values), span names and attributes, and the prompts and stubs the model or
the sandbox sees.

    scan = SecretScan(secret)
    scan.history(await handle.fetch_history())
    scan.text("worker logs", caplog.text)
    scan.assert_clean()
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from agentsteps.telemetry.metrics import REGISTRY
from agentsteps.telemetry.runtime import collector_for


def decoded_payloads(node: Any) -> list[str]:
    """Every payload under ``node`` (a history as ``to_json_dict()``), metadata and data base64-decoded."""
    found: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("data"), str) or isinstance(node.get("metadata"), dict):
            found += [_b64(node.get("data", ""))]
            found += [_b64(v) for v in (node.get("metadata") or {}).values() if isinstance(v, str)]
        for value in node.values():
            found += decoded_payloads(value)
    elif isinstance(node, list):
        for value in node:
            found += decoded_payloads(value)
    return found


def _b64(text: str) -> str:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return text


class SecretScan:
    """Collects what to search, then asserts that no secret appears in any of it, naming where it did."""

    def __init__(self, *secrets: str) -> None:
        assert secrets and all(len(s) >= 8 for s in secrets), "scan for real secrets, not short strings"
        self.secrets = secrets
        self.sources: list[tuple[str, bytes]] = []
        self.scanned: set[str] = set()

    def text(self, where: str, text: str) -> SecretScan:
        self.sources.append((where, text.encode("utf-8", "replace")))
        self.scanned.add(where)
        return self

    def history(self, history: Any, where: str = "history") -> SecretScan:
        """A ``WorkflowHistory``: its JSON as is, and every payload in it decoded."""
        as_dict = history.to_json_dict()
        payloads = decoded_payloads(as_dict)
        assert payloads, "a history without payloads: nothing was decoded"
        self.text(f"{where} (JSON)", json.dumps(as_dict))
        return self.text(f"{where} (decoded payloads)", "\n".join(payloads))

    def files(self, where: str, root: Path) -> SecretScan:
        """Every file under ``root`` (payload store, state dir with the Temporal database), as raw bytes."""
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        for path in paths:
            self.sources.append((f"{where}: {path.name}", path.read_bytes()))
        self.scanned.add(where)
        return self

    def metrics(self) -> SecretScan:
        """The ``/metrics`` exposition, label names, label values and values, Temporal's metrics included."""
        collector = collector_for()
        if collector is not None:
            collector.drain()
        return self.text("/metrics exposition", generate_latest(REGISTRY).decode())

    def spans(self, spans: Iterable[Any]) -> SecretScan:
        """Finished OpenTelemetry spans: names, attributes and event attributes."""
        parts = []
        for span in spans:
            parts.append(span.name)
            parts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
            for event in span.events:
                parts += [event.name, *(f"{k}={v}" for k, v in (event.attributes or {}).items())]
        return self.text("span attributes", "\n".join(parts))

    def requests(self, requests: Iterable[Any], where: str = "prompts") -> SecretScan:
        """What the scripted model received: every request body (headers carry the provider key by design)."""
        return self.text(where, "\n".join(json.dumps(r.body) for r in requests))

    def leaks(self) -> list[str]:
        return [
            f"{secret[:6]}… in {where}"
            for where, data in self.sources
            for secret in self.secrets
            if secret.encode() in data
        ]

    def assert_clean(self) -> None:
        leaks = self.leaks()
        assert not leaks, "secret found: " + "; ".join(leaks)
