"""``llm.call`` reads a run's tool schemas from the catalog its resolving call stored (``LLMRequest.tools_ref``).

The provider receives exactly the request it received with the schemas inline,
every check holds on them, and a catalog that is another run's, altered,
forged or gone fails the call typed and not retried.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import MODEL
from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.llm.providers.http_transport import provider_http_client
from agentsteps.activities.tools.activities import ToolActivities
from agentsteps.activities.tools.registry import ToolRegistry
from agentsteps.contracts import LLMConfig, LLMRequest, Message
from agentsteps.contracts.llm.tokens import count_prompt_tokens
from agentsteps.contracts.llm.tool_catalog import ToolCatalogRef, catalog_ref, encode_catalog
from agentsteps.contracts.llm.tools import ToolSchema
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

OWNER = "run-a/1"
NAMES = ["lookup_order", "ship_order"]


class OrderQuery(BaseModel):
    order: str
    """The order's id, as the customer gave it (for example A-17)."""
    express: bool = False


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool()
    def lookup_order(args: OrderQuery) -> dict:
        """Where an order is: its status, carrier and the date it left the warehouse."""
        return {"status": "shipped"}

    @tools.tool(side_effects=True)
    def ship_order(args: OrderQuery) -> dict:
        """Hand an order to the carrier; express when asked."""
        return {"shipped": args.order}

    return tools


def worker(root: Path, settings, http) -> tuple[LLMActivities, ConversationStore]:
    """One worker's activities over the shared store ``root``, with its own (empty) caches."""
    conversations = ConversationStore(PayloadStore(LocalDirStorageDriver(root)))
    tools = ToolActivities(registry(), conversations=conversations)
    return LLMActivities(settings.providers, http, conversations=conversations, describe=tools.describe), conversations


@pytest.fixture
async def http():
    async with provider_http_client(5.0) as client:
        yield client


def request(**fields) -> LLMRequest:
    data = {
        "config": LLMConfig(model=MODEL, max_tokens=64, context_window=16_000),
        "messages": [Message.system("you ship orders"), Message.user("where is A-17?")],
        "chained": True,
        "owner": OWNER,
    }
    data.update(fields)
    return LLMRequest(**data)


async def resolved(llm: LLMActivities) -> tuple[list[ToolSchema], ToolCatalogRef]:
    first = await llm.call(request(tool_names=NAMES))
    assert first.tools is not None and first.tools_ref is not None and first.tools_ref.count == len(NAMES)
    return first.tools, first.tools_ref


async def test_the_provider_receives_the_same_request_from_the_catalog_as_with_the_schemas_inline(
    tmp_path, settings, scripted, http
):
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    llm, _ = worker(tmp_path, settings, http)
    tools, ref = await resolved(llm)

    await llm.call(request(tools=tools))
    inline = scripted.requests[-1].body
    await llm.call(request(tools_ref=ref))
    by_ref = scripted.requests[-1].body
    # A worker that never saw the catalog reads it from the store, verified, and sends the same.
    other, _ = worker(tmp_path, settings, http)
    await other.call(request(tools_ref=ref))
    elsewhere = scripted.requests[-1].body

    assert [t["function"]["name"] for t in inline["tools"]] == NAMES
    assert "left the warehouse" in json.dumps(inline["tools"])
    # Parsed in order: the same keys in the same order, every value equal.
    assert json.dumps(by_ref) == json.dumps(inline) == json.dumps(elsewhere)
    # In the request itself only the reference travels (this is what history holds).
    wire = request(tools_ref=ref).model_dump_json()
    assert "left the warehouse" not in wire and ref.sha256 in wire
    assert "tools_ref" not in request(tools=tools).model_dump_json(), "a request without it is the bytes it was"


async def test_the_token_bound_and_the_schema_checks_count_the_catalog_s_tools(tmp_path, settings, scripted, http):
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    llm, conversations = worker(tmp_path, settings, http)
    tools, ref = await resolved(llm)
    sent_before = len(scripted.requests)

    # An allowance the prompt fits without its tools but not with them: refused before anything is sent.
    with_tools = count_prompt_tokens(request(tools=tools, chained=False))
    without = count_prompt_tokens(request(chained=False))
    assert with_tools > without
    allowance = 64 + (with_tools + without) // 2
    for case in (request(tools=tools, token_allowance=allowance), request(tools_ref=ref, token_allowance=allowance)):
        with pytest.raises(ApplicationError) as refused:
            await llm.call(case)
        assert refused.value.type == "BudgetExceededError" and refused.value.non_retryable

    # A catalog bound to the run but holding a schema that is not valid JSON Schema (written by whoever can write
    # the store): the precondition refuses it as it refuses it inline.
    broken = [ToolSchema(name="lookup_order", parameters={"type": 12})]
    data = encode_catalog(broken, OWNER)
    forged = catalog_ref(data, 1, await conversations._store.put(data))
    for case in (request(tools=broken), request(tools_ref=forged)):
        with pytest.raises(ApplicationError) as refused:
            await llm.call(case)
        assert refused.value.type == "ContractViolationError" and refused.value.non_retryable
    assert len(scripted.requests) == sent_before, "nothing was sent to the model"


async def test_a_catalog_of_another_run_altered_forged_or_gone_fails_typed_and_is_not_retried(
    tmp_path, settings, scripted, http
):
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    llm, conversations = worker(tmp_path, settings, http)
    tools, ref = await resolved(llm)
    fresh, fresh_store = worker(tmp_path, settings, http)  # no cache: every case is read from the store
    sent_before = len(scripted.requests)

    store = fresh_store._store
    other_run = encode_catalog(tools, "run-b/1")
    theirs = catalog_ref(other_run, len(tools), await store.put(other_run))
    segment = (await fresh.call(request(tools=tools))).conversation
    assert segment is not None
    sent_before += 1
    not_json = b"\xff" * 40
    junk = catalog_ref(not_json, 2, await store.put(not_json))
    missing = ToolCatalogRef(sha256="0" * 64, count=2, claim={"hash_algorithm": "sha256", "hash_value": "0" * 64})

    integrity = {
        "bound to another run": request(tools_ref=ref, owner="run-b/1"),
        "another run's catalog": request(tools_ref=theirs),
        "a conversation segment named as a catalog": request(
            tools_ref=ToolCatalogRef(sha256=segment.sha256, count=2, claim=segment.claim)
        ),
        "the digest of other bytes": request(tools_ref=ref.model_copy(update={"sha256": "f" * 64})),
        "the wrong count": request(tools_ref=ref.model_copy(update={"count": 5})),
        "not json": request(tools_ref=junk),
        "not a digest": request(tools_ref=ref.model_copy(update={"claim": {"hash_value": "../../etc/passwd"}})),
        "schemas beside it": request(tools_ref=ref, tools=tools),
        "names beside it": request(tools_ref=ref, tool_names=NAMES),
    }
    for case, bad in integrity.items():
        with pytest.raises(ApplicationError) as refused:
            await fresh.call(bad)
        assert refused.value.type == "PayloadIntegrityError" and refused.value.non_retryable, case
    with pytest.raises(ApplicationError) as gone:
        await fresh.call(request(tools_ref=missing))
    assert (
        gone.value.type == "PayloadMissingError" and gone.value.non_retryable and "tool catalog" in gone.value.message
    )

    # Altered in the store after it was written: the worker that never saw it refuses it.
    path = store.driver.path_for(ref.claim["hash_value"])
    path.write_bytes(path.read_bytes().replace(b"express", b"expresS"))
    with pytest.raises(ApplicationError) as altered:
        await fresh.call(request(tools_ref=ref))
    assert altered.value.type == "PayloadIntegrityError" and altered.value.non_retryable
    assert len(scripted.requests) == sent_before, "nothing was sent to the model"


async def test_an_unchained_resolving_call_stores_no_catalog(tmp_path, settings, scripted, http):
    """A catalog is always bound to a run: a request without an owner gets none (and sends its schemas later)."""
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    llm, _ = worker(tmp_path, settings, http)
    answer = await llm.call(request(tool_names=NAMES, chained=False, owner=""))
    assert answer.tools is not None and answer.tools_ref is None
    assert not (tmp_path / "sha256").exists(), "nothing was stored"


async def test_a_store_tools_call_stores_a_catalog_only_its_session_reads(tmp_path, settings, scripted, http):
    """A session's first call carrying its schemas stores them (``store_tools``) bound to the session; every later
    call of the session reads them back on any worker, and a fork (another owner) is refused, typed."""
    scripted.set_script({"rules": [], "default": {"content": "ok"}})
    llm, _ = worker(tmp_path, settings, http)
    tools = [registry().schemas()[name] for name in NAMES]
    session, fork = "session-a/0192-first-run", "session-fork/0193-first-run"
    first = await llm.call(request(tools=tools, store_tools=True, owner=session))
    ref = first.tools_ref
    assert ref is not None and ref.count == len(NAMES) and first.tools is None
    inline = scripted.requests[-1].body

    other, _ = worker(tmp_path, settings, http)  # another worker, days later: no cache
    await other.call(request(tools_ref=ref, owner=session))
    assert json.dumps(scripted.requests[-1].body) == json.dumps(inline)
    sent = len(scripted.requests)
    with pytest.raises(ApplicationError) as foreign:
        await worker(tmp_path, settings, http)[0].call(request(tools_ref=ref, owner=fork))
    assert foreign.value.type == "PayloadIntegrityError" and foreign.value.non_retryable
    assert "another run or session" in foreign.value.message
    assert len(scripted.requests) == sent, "nothing was sent to the model"

    # Hostile or pointless: with no owner, or no schemas, nothing is stored and no ref comes back.
    assert (await llm.call(request(tools=tools, store_tools=True, chained=False, owner=""))).tools_ref is None
    assert (await llm.call(request(store_tools=True, owner=session))).tools_ref is None
    # A request without the flag is the bytes it was.
    assert "store_tools" not in request(tools=tools).model_dump_json()
