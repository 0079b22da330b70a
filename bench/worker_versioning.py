"""What Temporal's Worker Versioning would do for agentsteps' upgrades, measured on a real dev server.

Two releases of two small workflows (``versioned_workflows.py``) are deployed on
one task queue as two versions of one worker deployment, 1.0 and then 2.0; 2.0
runs activity B before A, a command change with no ``workflow.patched`` gate. It
shows and counts, in one run of well under a minute:

- ``pinned_one_shot``: a PINNED run started on 1.0 and waiting (an approval, a
  slow tool) when 2.0 becomes current finishes on 1.0's workers, with no patch;
- ``session_upgrade_at_can``: a PINNED session whose run continues-as-new
  between turns once the server says the target version changed
  (``initial_versioning_behavior=AUTO_UPGRADE``) takes its next turn on 2.0,
  with no non-determinism; an idle session does not move until a turn wakes it;
- ``auto_upgrade_session``: the same session marked AUTO_UPGRADE moves at its
  next workflow task instead, replays 1.0's history on 2.0's code and fails
  with non-determinism: auto-upgrade needs the patch, as today;
- ``v1_workers_gone``: a pinned run whose version has no workers left makes no
  progress and reports no error, for as long as the workers are away
  (``--stuck`` seconds here); it finishes when 1.0 is back. Moving it to 2.0
  instead (a pinned override, what an operator would do) replays it on 2.0's
  code: non-determinism again without the patch;
- ``cost_per_run``: history events, bytes and billable actions (``billable.py``)
  of the same 2.0 run three ways: unversioned with no gate (the floor), unversioned
  behind ``workflow.patched`` (today: a marker and its ``TemporalChangeVersion``
  upsert), and versioned with no gate;
- ``replay``: a 1.0 history replayed offline against 2.0 with and without the
  gate, as ``tests/workflows/test_replay_histories.py`` does.

The dev server is started with the embedded stack's arguments (``client/dev_server.py``).
The last line is one JSON object.

    .venv/bin/python bench/worker_versioning.py [--stuck 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from billable import billable_actions
from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, WorkerDeploymentVersionStatus, WorkflowTaskFailedCause
from temporalio.api.workflow.v1 import WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    UpdateWorkflowExecutionOptionsRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.common import PinnedVersioningOverride, VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker, WorkerDeploymentConfig
from versioned_workflows import (
    ONE_SHOT,
    SESSION,
    AutoSessionV1,
    AutoSessionV2,
    OneShotV1,
    OneShotV2,
    OneShotV2Patched,
    SessionState,
    SessionV1,
    SessionV2,
    step_a,
    step_b,
)

from agentsteps.client.dev_server import SERVER_STARTUP, dev_server_args, temporal_binary

DEPLOYMENT = "bench-agentsteps"
BUILDS = {
    "1.0": [OneShotV1, SessionV1, AutoSessionV1],
    "2.0": [OneShotV2, SessionV2, AutoSessionV2],
}
NONDETERMINISM = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Fleet:
    """The deployment's workers, started and stopped as a rollout would."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client, self.task_queue = client, task_queue
        self.running: dict[str, tuple[Worker, asyncio.Task[None]]] = {}

    async def start(self, build: str) -> None:
        worker = Worker(
            self.client,
            task_queue=self.task_queue,
            workflows=BUILDS[build],
            activities=[step_a, step_b],
            deployment_config=WorkerDeploymentConfig(
                version=WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id=build),
                use_worker_versioning=True,
                default_versioning_behavior=VersioningBehavior.PINNED,
            ),
        )
        self.running[build] = (worker, asyncio.create_task(worker.run()))
        await until(lambda: self._known(build), what=f"version {build} registered")

    async def stop(self, build: str) -> None:
        worker, task = self.running.pop(build)
        await worker.shutdown()
        await task

    async def _known(self, build: str) -> bool:
        return build in await self.versions()

    async def versions(self) -> dict[str, str]:
        """Each version's build id and status (``CURRENT``, ``DRAINING``, ``INACTIVE``...)."""
        try:
            info = (
                await self.client.workflow_service.describe_worker_deployment(
                    DescribeWorkerDeploymentRequest(namespace=self.client.namespace, deployment_name=DEPLOYMENT)
                )
            ).worker_deployment_info
        except Exception:  # the deployment exists once its first worker polled
            return {}
        return {
            v.deployment_version.build_id: WorkerDeploymentVersionStatus.Name(v.status).rsplit("_", 1)[-1]
            for v in info.version_summaries
        }

    async def set_current(self, build: str) -> float:
        """Seconds until the server took ``build`` as current. It refuses ("missing active task queues from
        the current version") until the new version's workers poll for activity tasks as well as workflow
        tasks, as the current one's do."""
        started = time.perf_counter()
        while True:
            try:
                await self.client.workflow_service.set_worker_deployment_current_version(
                    SetWorkerDeploymentCurrentVersionRequest(
                        namespace=self.client.namespace, deployment_name=DEPLOYMENT, build_id=build
                    )
                )
                return time.perf_counter() - started
            except RPCError as err:
                if err.status != RPCStatusCode.FAILED_PRECONDITION or time.perf_counter() - started > 30:
                    raise
                await asyncio.sleep(0.1)


async def until(check: Callable[[], Awaitable[bool]], *, what: str, timeout: float = 30.0) -> float:
    started = time.perf_counter()
    while not await check():
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        await asyncio.sleep(0.1)
    return time.perf_counter() - started


async def events(handle: WorkflowHandle[Any, Any]) -> list[Any]:
    return [e async for e in handle.fetch_history_events()]


async def pinned_build(handle: WorkflowHandle[Any, Any]) -> str:
    info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
    return info.deployment_version.build_id


def nondeterminism_failures(history: list[Any]) -> int:
    return sum(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and e.workflow_task_failed_event_attributes.cause == NONDETERMINISM
        for e in history
    )


async def pending_task_attempts(handle: WorkflowHandle[Any, Any]) -> int:
    pending = (await handle.describe()).raw_description.pending_workflow_task
    return pending.attempt


async def turn_taken(handle: WorkflowHandle[Any, Any], count: int) -> bool:
    try:
        return len(await handle.query("releases", result_type=list[str])) >= count
    except Exception:  # between runs of a continue-as-new
        return False


async def pin_to(client: Client, workflow_id: str, build: str) -> None:
    """An operator moving a pinned run to another version (``temporal workflow update-options``)."""
    override = PinnedVersioningOverride(WorkerDeploymentVersion(deployment_name=DEPLOYMENT, build_id=build))
    await client.workflow_service.update_workflow_execution_options(
        UpdateWorkflowExecutionOptionsRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id),
            workflow_execution_options=WorkflowExecutionOptions(versioning_override=override._to_proto()),
            update_mask=FieldMask(paths=["versioning_override"]),
        )
    )


async def one_shot_cost(client: Client, task_queue: str, workflows: list[type], versioned: bool) -> dict[str, int]:
    """History and billable actions of one 2.0 run on a worker of ``workflows`` (its own queue if unversioned)."""
    # The signal goes with the start, so every side's run takes the same workflow tasks.
    if versioned:
        handle = await client.start_workflow(
            ONE_SHOT, id=f"cost-{uuid.uuid4().hex[:8]}", task_queue=task_queue, start_signal="go"
        )
        await handle.result()
    else:
        # A name as long as the versioned queue's: a task queue's name is in many events of the history.
        queue = f"bench-unversioned-{uuid.uuid4().hex[:5]}"
        assert len(queue) == len(task_queue)
        async with Worker(client, task_queue=queue, workflows=workflows, activities=[step_a, step_b]):
            handle = await client.start_workflow(
                ONE_SHOT, id=f"cost-{uuid.uuid4().hex[:8]}", task_queue=queue, start_signal="go"
            )
            await handle.result()
    history = await events(handle)
    return {"events": len(history), **(await billable_actions(client, handle.id))}


async def replays(history: Any, workflows: list[type]) -> str:
    result = await Replayer(workflows=workflows).replay_workflow(history, raise_on_replay_failure=False)
    return "ok" if result.replay_failure is None else type(result.replay_failure).__name__


async def main(stuck: float) -> dict[str, Any]:
    started = time.perf_counter()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        dev_server_startup_timeout=SERVER_STARTUP,
        dev_server_extra_args=dev_server_args(),
    )
    client, queue = env.client, f"bench-versioning-{uuid.uuid4().hex[:6]}"
    fleet = Fleet(client, queue)
    version = subprocess.run([temporal_binary(), "--version"], capture_output=True, text=True, check=True)
    out: dict[str, Any] = {"server": version.stdout.strip()}
    try:
        await fleet.start("1.0")
        out["set_current_1_0_s"] = round(await fleet.set_current("1.0"), 3)

        # Runs in flight when 2.0 ships: two pinned one-shot runs, a pinned session and an auto-upgrade one.
        pinned = await client.start_workflow(ONE_SHOT, id=f"pinned-{uuid.uuid4().hex[:6]}", task_queue=queue)
        orphan = await client.start_workflow(ONE_SHOT, id=f"orphan-{uuid.uuid4().hex[:6]}", task_queue=queue)
        moved = await client.start_workflow(ONE_SHOT, id=f"moved-{uuid.uuid4().hex[:6]}", task_queue=queue)
        sessions = {}
        for name in (SESSION, SESSION + "Auto"):
            sessions[name] = await client.start_workflow(
                name,
                SessionState(),
                id=f"{name}-{uuid.uuid4().hex[:6]}",
                task_queue=queue,
                start_signal="turn",
                start_signal_args=["turn 1"],
            )
            await until(lambda h=sessions[name]: turn_taken(h, 1), what=f"{name}'s first turn")
        for handle in (pinned, orphan, moved):
            await until(lambda h=handle: _has(h, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED), what="the first step")
        session, auto = sessions[SESSION], sessions[SESSION + "Auto"]

        await fleet.start("2.0")
        out["set_current_2_0_s"] = round(await fleet.set_current("2.0"), 3)
        out["versions_after_2_0_current"] = await fleet.versions()
        log(f"2.0 current; versions {out['versions_after_2_0_current']}")

        # (a) The pinned run finishes on 1.0: no patch, no replay on 2.0.
        await pinned.signal("go")
        release = await pinned.result()
        history = await events(pinned)
        out["pinned_one_shot"] = {
            "finished_on": release,
            "pinned_build": await pinned_build(pinned),
            "markers": sum(e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED for e in history),
            "nondeterminism_failures": nondeterminism_failures(history),
        }
        log(f"(a) {out['pinned_one_shot']}")

        # (b) The pinned session: idle, it stays on 1.0; its next turn continues it as new on 2.0.
        await asyncio.sleep(1.0)
        idle_build = await pinned_build(session)
        first_run = session.result_run_id
        await session.signal("turn", "turn 2")
        waited = await until(lambda: turn_taken(session, 2), what="the session's second turn")
        releases = await session.query("releases", result_type=list[str])
        desc = await session.describe()
        first = client.get_workflow_handle(session.id, run_id=first_run)
        first_history, second_history = await events(first), await events(client.get_workflow_handle(session.id))
        out["session_upgrade_at_can"] = {
            "pinned_build_while_idle_after_2_0_current": idle_build,
            "turns_by_release": releases,
            "pinned_build_after_the_turn": await pinned_build(session),
            "runs": 2 if desc.run_id != first_run else 1,
            "turn_2_seconds": round(waited, 3),
            "nondeterminism_failures": nondeterminism_failures(first_history) + nondeterminism_failures(second_history),
            "first_run": {"events": len(first_history), **(await _run_figures(client, session.id, first_run))},
        }
        log(f"(b) {out['session_upgrade_at_can']}")

        # (b') The AUTO_UPGRADE session moves at its next workflow task: 2.0 replays 1.0's turn.
        await auto.signal("turn", "turn 2")
        waited = await until(
            lambda: _has(auto, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED), what="the auto-upgrade session's failure"
        )
        await asyncio.sleep(1.0)
        history = await events(auto)
        out["auto_upgrade_session"] = {
            "nondeterminism_failures": nondeterminism_failures(history),
            "seconds_to_first_failure": round(waited, 3),
            "failure": _first_failure(history),
            "pending_task_attempts": await pending_task_attempts(auto),
        }
        log(f"(b') {out['auto_upgrade_session']}")
        await auto.terminate("benchmark: shown")

        # (c) 1.0's workers are gone: a pinned run waits, silently, until they are back.
        query = f'TemporalWorkerDeploymentVersion="{DEPLOYMENT}:1.0" AND ExecutionStatus="Running"'
        open_on_1_0 = (await client.count_workflows(query)).count
        await fleet.stop("1.0")
        before = await events(orphan)
        await orphan.signal("go")
        await asyncio.sleep(stuck)
        after = await events(orphan)
        stuck_attempts = await pending_task_attempts(orphan)
        # An operator moves another one to 2.0 instead of bringing 1.0 back.
        await pin_to(client, moved.id, "2.0")
        await moved.signal("go")
        moved_wait = await until(
            lambda: _has(moved, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED), what="the moved run's failure"
        )
        moved_history = await events(moved)
        restarted = time.perf_counter()
        await fleet.start("1.0")
        await orphan.result()
        back_s = time.perf_counter() - restarted
        out["v1_workers_gone"] = {
            "open_runs_pinned_to_1_0_before_stop": open_on_1_0,
            "drain_query": query,
            "stuck_seconds": stuck,
            "events_added_while_stuck": [_name(e) for e in after[len(before) :]],
            "pending_task_attempts_while_stuck": stuck_attempts,
            "finished_after_1_0_back_s": round(back_s, 3),
            "moved_to_2_0_nondeterminism_failures": nondeterminism_failures(moved_history),
            "moved_to_2_0_seconds_to_failure": round(moved_wait, 3),
            "moved_to_2_0_failure": _first_failure(moved_history),
        }
        log(f"(c) {out['v1_workers_gone']}")
        await moved.terminate("benchmark: shown")

        # (d) What a run costs: the gate's marker and upsert against a versioned run with no gate.
        out["cost_per_run"] = {
            "unversioned_no_gate": await one_shot_cost(client, queue, [OneShotV2], versioned=False),
            "unversioned_patched": await one_shot_cost(client, queue, [OneShotV2Patched], versioned=False),
            "versioned_no_gate": await one_shot_cost(client, queue, [], versioned=True),
        }
        log(f"(d) {out['cost_per_run']}")

        # (e) Offline replay of a 1.0 history, as tests/histories are replayed.
        recorded = await pinned.fetch_history()
        out["replay"] = {
            "v1_history_on_2_0_no_gate": await replays(recorded, [OneShotV2]),
            "v1_history_on_2_0_patched": await replays(recorded, [OneShotV2Patched]),
        }
        log(f"(e) {out['replay']}")

        await session.signal("turn", "close")
        await session.result()
        out["versions_at_end"] = await fleet.versions()
        for build in list(fleet.running):
            await fleet.stop(build)
    finally:
        await env.shutdown()
    out["wall_seconds"] = round(time.perf_counter() - started, 1)
    return out


def _first_failure(history: list[Any]) -> str:
    failed = [e for e in history if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
    return failed[0].workflow_task_failed_event_attributes.failure.message if failed else ""


def _name(event: Any) -> str:
    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")


async def _has(handle: WorkflowHandle[Any, Any], kind: int) -> bool:
    return any(e.event_type == kind for e in await events(handle))


async def _run_figures(client: Client, workflow_id: str, run_id: str | None) -> dict[str, int]:
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    history = await events(handle)
    counts = {
        "continue_as_new": sum(
            e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW for e in history
        ),
        "history_bytes": sum(e.ByteSize() for e in history),
    }
    return counts


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--stuck", type=float, default=5.0, help="seconds a pinned run is watched with its workers gone"
    )
    summary = asyncio.run(main(parser.parse_args().stuck))
    print(json.dumps(summary), flush=True)
    sys.stderr.flush()
    os._exit(0)  # temporalio issue #300
