"""Per-prefix caching in ``llm.call``: a warm worker sends and decides exactly what a cold one does.

The conversation store keeps, beside each verified prefix, what calls derived
from it (``contracts/llm/prefix.py``). These tests prove the cache changes no
result (the same request bytes, the same answer, cold and warm), stays
bounded, is never reused by another owner, and never hides a stored segment
altered behind its back from a worker that reads the store.
"""

from __future__ import annotations

import json

import httpx2
import openai
import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentsteps.activities.llm.activities import LLMActivities
from agentsteps.activities.llm.providers.openai import request_body, request_to_wire
from agentsteps.contracts import LLMConfig, LLMRequest, LLMResponse, LLMToolCall, Message, ToolSchema
from agentsteps.contracts.config.settings import ProviderSettings
from agentsteps.contracts.llm.prefix import Folds, KnownPrefix
from agentsteps.storage.conversations import ConversationStore
from agentsteps.storage.payload_store import LocalDirStorageDriver, PayloadStore

WEATHER = ToolSchema(
    name="get_weather",
    description="Weather.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CONFIG = LLMConfig(model="gpt-4o-2024-08-06", max_tokens=64, context_window=128_000, temperature=0.5)


def step_messages(n: int) -> list[Message]:
    return [
        Message(
            role="assistant", tool_calls=(LLMToolCall(id=f"c{n}", name="get_weather", arguments='{"city":"Paris"}'),)
        ),
        Message(role="tool", tool_call_id=f"c{n}", name="get_weather", content=f"{n}°C, ☀️ \u65e5\u672c"),
    ]


def conversation(steps: int) -> list[Message]:
    messages = [Message.system("Be brief."), Message.user("Weather?"), Message(role="assistant", content="")]
    for n in range(steps):
        messages += step_messages(n)
    return messages


async def sdk_sends(params: dict) -> httpx2.Request:
    """The request the official SDK itself sends for ``params`` posted as a JSON body."""
    sent: list[httpx2.Request] = []

    def capture(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200, json={})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(capture)) as http:
        sdk = openai.AsyncOpenAI(api_key="sk-test", base_url="http://model.invalid/v1", http_client=http, max_retries=0)
        await sdk.post("/chat/completions", cast_to=httpx2.Response, body=params)
    return sent[0]


@pytest.mark.parametrize("extra", [None, {"stream": True, "stream_options": {"include_usage": True}}])
async def test_the_body_is_what_the_sdk_sends_cold_warm_and_at_every_split(extra):
    messages = conversation(6)
    req = LLMRequest(config=CONFIG, messages=messages, tools=[WEATHER])
    sent = await sdk_sends({**request_to_wire(req), **(extra or {})})
    sdk = sent.content
    assert sent.headers["content-type"] == "application/json" and rb"\u65e5" not in sdk  # UTF-8, not escaped
    assert request_body(req, extra=extra) == sdk
    assert request_body(req, extra=extra, folds=Folds()) == sdk
    for split in range(len(messages) + 1):
        known = KnownPrefix(messages[:split])
        request_body(
            LLMRequest(config=CONFIG, messages=list(known.messages), tools=[WEATHER]),
            extra=extra,
            folds=Folds(None, known),
        )
        assert known.kinds() == ["openai.messages"]
        warm = LLMRequest(config=CONFIG, messages=[*known.messages, *messages[split:]], tools=[WEATHER])
        assert request_body(warm, extra=extra, folds=Folds(known)) == sdk, split


def _answer(call_id: str) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": CONFIG.model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


class Model:
    """The provider's side of the wire (httpx's test seam): records each request, answers with a tool call whose
    id repeats (``call_0`` every time, as some servers do), so the engine's call-id fold has work to do."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(200, json=_answer("call_0"))

    def activities(self, conversations: ConversationStore) -> LLMActivities:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))
        settings = ProviderSettings(openai_base_url="http://model.invalid/v1", openai_api_key=SecretStr("sk-test"))
        return LLMActivities(settings, http, conversations=conversations)


async def _chain(activities: LLMActivities, steps: int) -> list[LLMResponse]:
    """``steps`` chained calls, each sending only its new messages, as the workflow's ConversationChain does."""
    responses: list[LLMResponse] = []
    ref, new = None, [Message.system("Be brief."), Message.user("Weather?")]
    for n in range(steps):
        req = LLMRequest(config=CONFIG, messages=new, tools=[WEATHER], conversation=ref, chained=True)
        response = await ActivityEnvironment().run(activities.call, req)
        responses.append(response)
        ref = response.conversation
        call_id = response.message.tool_calls[0].id
        new = [response.message, Message(role="tool", tool_call_id=call_id, name="get_weather", content=f"{n}°C")]
    return responses


async def test_a_warm_worker_sends_and_answers_what_a_cold_worker_does(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path))
    warm_model = Model()
    warm_store = ConversationStore(store)
    warm = await _chain(warm_model.activities(warm_store), 6)
    # the warm worker resumed: the prefix each call stored carries what the call derived
    known = await warm_store.known(warm[-2].conversation)
    assert {"openai.messages", "pre.order", "tokens.bound", "call_ids.used"} <= set(known.kinds())
    assert len({m.tool_calls[0].id for m in (r.message for r in warm)}) == 6  # call_0 renamed each turn

    # Every call again, each on a worker that never saw the conversation (a fresh cache over the same store).
    for n in range(1, 6):
        cold_model = Model()
        cold_store = ConversationStore(store)
        assert (await cold_store.known(warm[n - 1].conversation)).kinds() == []
        previous = warm[n - 1]
        call_id = previous.message.tool_calls[0].id
        new = [previous.message, Message(role="tool", tool_call_id=call_id, name="get_weather", content=f"{n - 1}°C")]
        req = LLMRequest(config=CONFIG, messages=new, tools=[WEATHER], conversation=previous.conversation, chained=True)
        cold = await ActivityEnvironment().run(cold_model.activities(cold_store).call, req)
        sent_warm, sent_cold = warm_model.requests[n], cold_model.requests[0]
        assert sent_cold.content == sent_warm.content, n
        assert sent_cold.headers["content-type"] == sent_warm.headers["content-type"] == "application/json"
        assert cold == warm[n], n
    body = json.loads(warm_model.requests[-1].content)
    assert len(body["messages"]) == 2 + 2 * 5  # the whole conversation goes to the model (the empty answer: none)


async def test_the_cache_is_bounded_and_an_evicted_prefix_is_read_and_verified_again(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path))
    conversations = ConversationStore(store, cache_entries=2)
    first = conversation(1)
    known = KnownPrefix(first)
    known.keep("pre.order", object())
    head = await conversations.extend(None, known, first)
    assert await conversations.known(head) is known
    later = []
    for n in range(2):  # two more prefixes push the first one out
        later.append(KnownPrefix(conversation(n + 2)))
        later.append(await conversations.extend(None, later[-1], list(later[-1].messages)))
    assert [await conversations.known(ref) is k for k, ref in zip(later[::2], later[1::2])] == [True, True]

    again = await conversations.known(head)
    assert again is not known and again.kinds() == [] and list(again.messages) == first
    # read again from the store, so an alteration there is seen (typed, not retried)
    conversations = ConversationStore(store, cache_entries=1)
    await conversations.extend(None, conversation(9), conversation(9))
    path = LocalDirStorageDriver(tmp_path).path_for(head.claim["hash_value"])
    path.write_bytes(path.read_bytes().replace(b"Weather?", b"WEATHER?"))
    with pytest.raises(ApplicationError) as altered:
        await conversations.known(head)
    assert altered.value.type == "PayloadIntegrityError" and altered.value.non_retryable


async def test_another_owner_never_reuses_a_cached_prefix_or_what_was_derived_from_it(tmp_path):
    conversations = ConversationStore(PayloadStore(LocalDirStorageDriver(tmp_path)))
    messages = conversation(2)
    known = KnownPrefix(messages)
    known.keep("openai.messages", [b"forged"])
    head = await conversations.extend(None, known, messages, owner="desk-a/run-1")
    assert await conversations.known(head, "desk-a/run-1") is known
    with pytest.raises(ApplicationError) as foreign:  # the segment is desk-a's: read, and refused
        await conversations.known(head, "desk-b/run-9")
    assert foreign.value.type == "PayloadIntegrityError" and foreign.value.non_retryable


async def test_a_segment_altered_after_caching_fails_typed_on_a_worker_that_reads_it(tmp_path):
    store = PayloadStore(LocalDirStorageDriver(tmp_path))
    model = Model()
    warm_store = ConversationStore(store)
    responses = await _chain(model.activities(warm_store), 3)
    head = responses[0].conversation  # the first segment: the system and user messages
    path = LocalDirStorageDriver(tmp_path).path_for(head.claim["hash_value"])
    path.write_bytes(path.read_bytes().replace(b"Weather?", b"Forecast?"))

    last = responses[-1]
    call_id = last.message.tool_calls[0].id
    req = LLMRequest(
        config=CONFIG,
        conversation=last.conversation,
        chained=True,
        tools=[WEATHER],
        messages=[last.message, Message(role="tool", tool_call_id=call_id, name="get_weather", content="2°C")],
    )
    cold = Model()
    with pytest.raises(ApplicationError) as altered:
        await ActivityEnvironment().run(cold.activities(ConversationStore(store)).call, req)
    assert altered.value.type == "PayloadIntegrityError" and altered.value.non_retryable
    assert cold.requests == []  # nothing was sent
