"""``session.fork``: a session fork's first activity, binding the source's state to the fork.

The fork's input names the source's stored conversation and REPL dump, which
are bound to the source (``session_owner``, ``repl_keys``). Here the worker
reads them as the source's only: every conversation segment must be bound to
the source's chain and the REPL dump signed for the source's REPL, or the fork
fails typed (``PayloadIntegrityError``, ``PayloadMissingError`` when the store
has collected them, ``SnapshotIntegrityError``) before anything runs. Then they
are stored again bound to the fork. Content-addressed stores keep the bytes
once; only the binding is new.
"""

from __future__ import annotations

from temporalio import activity

from ...contracts.code.program import ReplMemory
from ...contracts.errors import PayloadIntegrityError
from ...contracts.names import SESSION_FORK
from ...contracts.persisted_ids import owned_by_workflow, parse_chain_owner
from ...contracts.session import SessionForkBound, SessionForkInput, repl_keys
from ...failures import to_application_error
from ...storage.conversations import ConversationStore
from ..sandbox.activities import SandboxActivities


class SessionForkActivities:
    def __init__(self, conversations: ConversationStore, sandbox: SandboxActivities) -> None:
        self._conversations = conversations
        self._sandbox = sandbox

    @activity.defn(name=SESSION_FORK)
    async def bind(self, inp: SessionForkInput) -> SessionForkBound:
        source = parse_chain_owner(inp.source_owner)
        if source is None or source.workflow_id != inp.source_session:
            raise _foreign(f"the fork names session {inp.source_session!r} but state owned by {inp.source_owner!r}")
        if activity.in_activity() and not owned_by_workflow(inp.owner, activity.info().workflow_id):
            raise _foreign(f"the fork's owner {inp.owner!r} is not the calling workflow")
        conversation = None
        if inp.conversation is not None:
            full = await self._conversations.load(inp.conversation, inp.source_owner)
            conversation = await self._conversations.extend(None, full, full, inp.owner)
        repl = None
        if inp.repl is not None:
            if inp.repl.key not in repl_keys(source.workflow_id, source.first_run_id):
                raise _foreign(f"the REPL memory {inp.repl.key!r} is not session {inp.source_session!r}'s")
            snapshot = None
            if inp.repl.snapshot is not None:
                blob = await self._sandbox.load_signed(inp.repl.key, inp.repl.snapshot)
                snapshot = await self._sandbox.save_signed(inp.repl_key, blob)
            repl = ReplMemory(key=inp.repl_key, snapshot=snapshot, variables=inp.repl.variables)
        return SessionForkBound(conversation=conversation, repl=repl)


def _foreign(message: str) -> BaseException:
    return to_application_error(PayloadIntegrityError(message))


__all__ = ["SessionForkActivities"]
