"""``session.fork`` against a real store and Monty: the source's state binds to the fork only if it is the source's.

Called in-process (outside an activity), as the worker would run it; every
refusal is the typed failure a workflow sees, and nothing is bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError

from agentsteps.activities.sandbox import SandboxActivities, SandboxPool, SnapshotVault
from agentsteps.activities.session import SessionForkActivities
from agentsteps.contracts import Message
from agentsteps.contracts.code.program import ReplMemory
from agentsteps.contracts.session import SessionForkInput, repl_keys, session_owner
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

SOURCE, FORK = session_owner("session-a", "run-a"), session_owner("session-a-fork1.0-x", "run-f")
OTHER = session_owner("session-b", "run-b")


@pytest_asyncio.fixture
async def sandbox(tmp_path: Path):
    pool = SandboxPool(max_processes=1)
    yield SandboxActivities(pool, SnapshotVault(PayloadStore(LocalDirStorageDriver(tmp_path / "p")), b"k" * 32))
    await pool.close()


@pytest.fixture
def conversations(tmp_path: Path) -> ConversationStore:
    return ConversationStore(PayloadStore(LocalDirStorageDriver(tmp_path / "p")))


async def _repl(sandbox: SandboxActivities, key: str) -> ReplMemory:
    async with sandbox.pool.session() as session:
        await session.feed_run("a = 'alpha'\n")
        return ReplMemory(key=key, snapshot=await sandbox.save_signed(key, await session.dump()))


def _input(**given: object) -> SessionForkInput:
    base: dict[str, object] = {
        "source_session": "session-a",
        "source_owner": SOURCE,
        "owner": FORK,
        "repl_key": f"{FORK}/repl",
    }
    return SessionForkInput.model_validate({**base, **given})


async def test_the_sources_state_comes_back_bound_to_the_fork(sandbox, conversations, tmp_path):
    messages = [Message.system("be brief"), Message.user("hello")]
    ref = await conversations.extend(None, messages, messages, SOURCE)
    repl = await _repl(sandbox, repl_keys("session-a", "run-a")[0])
    bound = await SessionForkActivities(conversations, sandbox).bind(_input(conversation=ref, repl=repl))
    assert bound.conversation is not None and bound.repl is not None
    assert await conversations.load(bound.conversation, FORK) == messages  # the fork's own now
    assert bound.repl.key == f"{FORK}/repl"
    await sandbox.load_signed(bound.repl.key, bound.repl.snapshot)  # signed for the fork
    uncached = ConversationStore(PayloadStore(LocalDirStorageDriver(tmp_path / "p")))  # another worker
    with pytest.raises(ApplicationError, match="another run or session"):
        await uncached.load(bound.conversation, SOURCE)


async def test_state_that_is_not_the_named_sources_is_refused_typed(sandbox, conversations):
    acts = SessionForkActivities(conversations, sandbox)
    messages = [Message.user("hello")]
    others = await conversations.extend(None, messages, messages, OTHER)
    with pytest.raises(ApplicationError) as refused:  # another session's conversation, claimed as the source's
        await acts.bind(_input(conversation=others))
    assert refused.value.type == "PayloadIntegrityError" and refused.value.non_retryable
    with pytest.raises(ApplicationError, match="owned by") as refused:  # an owner that is not the named session
        await acts.bind(_input(source_owner=OTHER, conversation=others))
    assert refused.value.type == "PayloadIntegrityError"
    other_repl = await _repl(sandbox, repl_keys("session-b", "run-b")[0])
    with pytest.raises(ApplicationError, match="is not session") as refused:  # another session's REPL memory
        await acts.bind(_input(repl=other_repl))
    assert refused.value.type == "PayloadIntegrityError"
    forged = other_repl.model_copy(update={"key": repl_keys("session-a", "run-a")[0]})
    with pytest.raises(ApplicationError) as refused:  # relabelled as the source's: its signature says otherwise
        await acts.bind(_input(repl=forged))
    assert refused.value.type == "SnapshotIntegrityError"


async def test_a_session_id_holding_a_slash_is_read_whole(sandbox, conversations):
    # The owner splits at its last "/" (run ids hold none): state of session "team/a" is never session "team"'s,
    # and a session whose id holds "/" can be forked.
    acts = SessionForkActivities(conversations, sandbox)
    messages = [Message.user("hello")]
    owner = session_owner("team/a", "run-a")
    ref = await conversations.extend(None, messages, messages, owner)
    with pytest.raises(ApplicationError, match="owned by") as refused:
        await acts.bind(_input(source_session="team", source_owner=owner, conversation=ref))
    assert refused.value.type == "PayloadIntegrityError"
    bound = await acts.bind(_input(source_session="team/a", source_owner=owner, conversation=ref))
    assert bound.conversation is not None and await conversations.load(bound.conversation, FORK) == messages
