"""Shared fixtures: one real Temporal dev server per test session."""

from __future__ import annotations

import os
import sys

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary

_exit_status = 0


@pytest_asyncio.fixture(scope="session")
async def temporal_env():
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def client(temporal_env) -> Client:
    return temporal_env.client


def pytest_ignore_collect(collection_path, config):
    # The fast lane (`-m fast`) skips importing modules that mark nothing fast:
    # importing them is most of what the lane would otherwise spend.
    if (
        config.getoption("markexpr") == "fast"
        and collection_path.name.startswith("test_")
        and collection_path.suffix == ".py"
    ):
        return True if "pytest.mark.fast" not in collection_path.read_text() else None
    return None


# Under xdist (`make test`) files are handed out in collection order, so the
# longest go first: the files measured longest (`--durations`, or per file with
# AGENTSTEPS_TEST_CPU, tests/README.md), then the other end-to-end files (child
# processes, kills, restarts), then the CLI's and storage's (subprocesses, S3),
# then the rest; a long file handed out last would run on alone while the other
# processes sit idle. Order within a file is kept.
_LONGEST = [
    "test_soak_e2e.py",
    "test_scale_out_foreign_key.py",
    "test_wheel_install.py",
    "test_cli_workers.py",
    "test_telemetry_dashboard.py",
    "test_code_mode_durability.py",
    "test_mcp_client.py",
    "test_scale_out_failures.py",
    "test_scale_out.py",
    "test_quota_burst.py",
    "test_stop_deadline.py",
    "test_cli_json.py",
]
_FIRST = {"e2e": 0, "client_cli": 1, "storage": 1}


def _hand_out_order(item: pytest.Item) -> tuple[int, int]:
    name = item.path.name
    return (_LONGEST.index(name), 0) if name in _LONGEST else (len(_LONGEST), _FIRST.get(item.path.parent.name, 2))


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=_hand_out_order)


_cpu_report = None


def pytest_configure(config):
    global _cpu_report
    # pytest-xdist 3.6+ hands out `--dist loadfile` files by test count, most first, by default: the
    # one-test files that are the longest would start last. Keep the order _hand_out_order gives.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if path := os.environ.get("AGENTSTEPS_TEST_CPU"):
        from cpu_report import CpuReport

        _cpu_report = CpuReport(path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # AGENTSTEPS_TEST_CPU=path: CPU seconds per file (tests/support/cpu_report.py), setup and teardown included.
    if _cpu_report is None:
        yield
        return
    _cpu_report.before()
    yield
    _cpu_report.after(item.nodeid.split("::", 1)[0], last_of_file=nextitem is None or nextitem.path != item.path)


def pytest_sessionfinish(session, exitstatus):
    global _exit_status
    _exit_status = int(exitstatus)
    if _cpu_report is not None:
        _cpu_report.write()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # temporalio issue #300: a process that used a Temporal client can abort at
    # interpreter exit. Leave with the real status once the report is out.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)


# --- the engine under test: scripted model + worker on a private task queue ---

import uuid  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from agentsteps.contracts.config.settings import ProviderSettings, WorkerSettings  # noqa: E402
from agentsteps.scripted_model import ScriptedModelServer  # noqa: E402


@pytest.fixture
def scripted():
    with ScriptedModelServer({"rules": []}) as server:
        yield server


@pytest.fixture
def settings(tmp_path, scripted) -> WorkerSettings:
    return WorkerSettings(
        state_dir=tmp_path / "state",
        task_queue=f"test-{uuid.uuid4().hex[:8]}",
        providers=ProviderSettings(
            openai_base_url=scripted.url_openai,
            anthropic_base_url=scripted.url_anthropic,
            request_timeout_seconds=5,
        ),
    )


@dataclass
class RunningEngine:
    client: Client
    settings: WorkerSettings

    @property
    def task_queue(self) -> str:
        return self.settings.task_queue


@pytest_asyncio.fixture(scope="module")
async def metered_client(temporal_env) -> Client:
    """A client on the metering runtime (``telemetry.runtime.build_runtime``): Temporal's metrics reach /metrics."""
    from agentsteps.telemetry.runtime import build_runtime

    return await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        data_converter=pydantic_data_converter,
        runtime=build_runtime(),
    )


@pytest_asyncio.fixture
async def engine(client, settings):
    from agentsteps.worker import running_worker

    async with running_worker(client, settings):
        yield RunningEngine(client=client, settings=settings)
