"""Fixtures the model-call activity tests share: one scripted model server a file, and the worker's HTTP client."""

from __future__ import annotations

import pytest

from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.scripted_model import ScriptedModelServer


@pytest.fixture(scope="module")
def server():
    """The scripted model on loopback, one per test file (a file that needs another script defines its own)."""
    with ScriptedModelServer() as s:
        yield s


@pytest.fixture
async def http():
    async with provider_http_client(5.0) as client:  # the worker's client: SDK types, aiohttp socket work
        yield client
