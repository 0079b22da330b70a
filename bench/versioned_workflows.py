"""The builds bench/worker_versioning.py deploys side by side: two releases of two small workflows.

Release 2.0 runs activity B before A, a command change no replay of a 1.0 history
reproduces, so a 1.0 run can only finish on 1.0's code, or on a build that gates
the change with ``workflow.patched`` (``*Patched`` below, as agentsteps gates such a
change today). Each class returns or records the release whose code ran, so the
benchmark sees which build did the work. Its own module because Temporal's
sandbox re-imports workflow modules.

Only the AUTO_UPGRADE session names its behaviour on the class: the server refuses
a workflow task completed with a behaviour by a worker that does not use
versioning, so classes that must also run unversioned (as agentsteps' would, for
the embedded stack) leave it to the worker's ``default_versioning_behavior``
(PINNED in the benchmark's versioned workers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import VersioningBehavior

ONE_SHOT = "VersionedOneShot"
SESSION = "VersionedSession"
PATCH = "bench-b-first"
_TIMEOUT = timedelta(seconds=30)


@activity.defn(name="bench.versioning.a")
async def step_a(label: str) -> str:
    return label


@activity.defn(name="bench.versioning.b")
async def step_b(label: str) -> str:
    return label


# --- a one-shot run: an agent run or a program, waiting once (an approval, a slow tool) -----------


class _OneShot:
    def __init__(self) -> None:
        self.go = False

    @workflow.signal(name="go")
    def proceed(self) -> None:
        self.go = True

    async def _rest(self, release: str) -> str:
        await workflow.execute_activity(step_a, "before the wait", start_to_close_timeout=_TIMEOUT)
        await workflow.wait_condition(lambda: self.go)
        await workflow.execute_activity(step_a, "after the wait", start_to_close_timeout=_TIMEOUT)
        return release


@workflow.defn(name=ONE_SHOT)
class OneShotV1(_OneShot):
    @workflow.run
    async def run(self) -> str:
        return await self._rest("1.0")


@workflow.defn(name=ONE_SHOT)
class OneShotV2(_OneShot):
    @workflow.run
    async def run(self) -> str:
        await workflow.execute_activity(step_b, "new in 2.0", start_to_close_timeout=_TIMEOUT)
        return await self._rest("2.0")


@workflow.defn(name=ONE_SHOT)
class OneShotV2Patched(_OneShot):
    """2.0 as a release without Worker Versioning must write it: B only for runs that start on it."""

    @workflow.run
    async def run(self) -> str:
        if workflow.patched(PATCH):
            await workflow.execute_activity(step_b, "new in 2.0", start_to_close_timeout=_TIMEOUT)
        return await self._rest("2.0-patched")


# --- a session: turns as signals, continue-as-new between turns --------------------------------------


@dataclass
class SessionState:
    """What a session carries over a continue-as-new: every release must read what an older one wrote."""

    releases: list[str] = field(default_factory=list)
    """The release whose code took each turn, in order."""
    pending: list[str] = field(default_factory=list)
    runs: int = 1


class _Session:
    RELEASE = ""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.state = SessionState()

    @workflow.signal(name="turn")
    def turn(self, text: str) -> None:
        self.pending.append(text)

    @workflow.query(name="releases")
    def releases(self) -> list[str]:
        return self.state.releases

    async def _take(self, text: str) -> None:
        await workflow.execute_activity(step_a, text, start_to_close_timeout=_TIMEOUT)

    async def _loop(self, carried: SessionState) -> list[str]:
        self.state = carried
        self.pending[:0] = carried.pending
        while True:
            await workflow.wait_condition(lambda: bool(self.pending))
            if workflow.info().is_target_worker_deployment_version_changed():
                # Between turns only: the next run starts on the task queue's current version.
                workflow.continue_as_new(
                    SessionState(self.state.releases, self.pending, self.state.runs + 1),
                    initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
                )
            text = self.pending.pop(0)
            if text == "close":
                return self.state.releases
            await self._take(text)
            self.state.releases.append(self.RELEASE)


@workflow.defn(name=SESSION)
class SessionV1(_Session):
    RELEASE = "1.0"

    @workflow.run
    async def run(self, carried: SessionState) -> list[str]:
        return await self._loop(carried)


@workflow.defn(name=SESSION)
class SessionV2(_Session):
    RELEASE = "2.0"

    @workflow.run
    async def run(self, carried: SessionState) -> list[str]:
        return await self._loop(carried)

    async def _take(self, text: str) -> None:
        await workflow.execute_activity(step_b, text, start_to_close_timeout=_TIMEOUT)
        await super()._take(text)


# The same session code marked AUTO_UPGRADE: it moves at its next workflow task, not at a continue-as-new.
@workflow.defn(name=SESSION + "Auto", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class AutoSessionV1(_Session):
    RELEASE = "1.0"

    @workflow.run
    async def run(self, carried: SessionState) -> list[str]:
        return await self._loop(carried)


@workflow.defn(name=SESSION + "Auto", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class AutoSessionV2(_Session):
    RELEASE = "2.0"

    @workflow.run
    async def run(self, carried: SessionState) -> list[str]:
        return await self._loop(carried)

    async def _take(self, text: str) -> None:
        await workflow.execute_activity(step_b, text, start_to_close_timeout=_TIMEOUT)
        await super()._take(text)
