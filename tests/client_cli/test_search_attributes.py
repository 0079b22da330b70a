"""The AgentSteps* search attributes on a server: registered by the dev server, checked by a starting worker."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary
from agentsteps.client.search_attributes import create_commands, ensure_search_attributes, missing_search_attributes
from agentsteps.contracts.errors import DeploymentConfigError
from agentsteps.contracts.names import SA_STEPS, SEARCH_ATTRIBUTES

# The dev server's arguments without the attributes: a namespace as a cluster has it before its operator acts.
_PLAIN_ARGS = [a for a in dev_server_args() if a != "--search-attribute" and a.split("=")[0] not in SEARCH_ATTRIBUTES]


async def test_the_embedded_dev_server_has_every_attribute_a_run_upserts(client):
    assert await missing_search_attributes(client, client.namespace) == {}


async def test_a_worker_on_a_namespace_without_them_registers_them_before_it_polls():
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=_PLAIN_ARGS,
        dev_server_log_level="error",
    )
    try:
        assert set(await missing_search_attributes(env.client, "default")) == set(SEARCH_ATTRIBUTES)
        await ensure_search_attributes(env.client, "default")
        assert await missing_search_attributes(env.client, "default") == {}
    finally:
        await env.shutdown()


async def test_an_attribute_of_another_type_stops_the_worker_with_what_to_do():
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_log_level="error",
        dev_server_extra_args=[*_PLAIN_ARGS, "--search-attribute", f"{SA_STEPS}=Keyword"],
    )
    try:
        with pytest.raises(DeploymentConfigError, match=f"{SA_STEPS} is INDEXED_VALUE_TYPE_KEYWORD, not Int"):
            await ensure_search_attributes(env.client, "default")
    finally:
        await env.shutdown()


def test_the_documented_commands_create_each_attribute_with_its_type():
    commands = create_commands("prod")
    assert len(commands) == len(SEARCH_ATTRIBUTES)
    for command, (name, kind) in zip(commands, SEARCH_ATTRIBUTES.items()):
        assert command == f"temporal operator search-attribute create --namespace prod --name {name} --type {kind}"
