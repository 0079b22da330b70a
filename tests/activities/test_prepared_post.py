"""``PreparedPost``: the request the SDK builds once is the request its own ``post`` sends, byte for byte.

Both paths hand their request to the same httpx2 client; a recording transport keeps what each handed
over, so the comparison is of the requests themselves (the providers' end-to-end HTTP is in
test_providers.py, against the scripted model server).
"""

from __future__ import annotations

import json

import anthropic
import httpx2
import openai
import pytest
from pydantic import SecretStr

from agentsteps.activities.llm.providers import OpenAIProvider, classify_sdk_error
from agentsteps.activities.llm.providers.base import PreparedPost
from agentsteps.activities.llm.providers.openai import CHAT_COMPLETIONS_PATH, request_body
from agentsteps.contracts import LLMConfig, LLMRequest, Message, RetryableProviderError, ToolSchema

KEY = "sk-test-prepared-9f8e7d"
ANSWER = {
    "id": "c",
    "object": "chat.completion",
    "created": 1,
    "model": "scripted-v1",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
REQUEST = LLMRequest(
    config=LLMConfig(model="scripted-v1", provider="openai", max_tokens=32),
    messages=[Message.system("Be brief."), Message.user("Weather in Oslo?")],
    tools=[
        ToolSchema(
            name="get_weather",
            description="Weather.",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        )
    ],
)


class Recorder:
    """An httpx2 transport that keeps each request it is handed and answers with ``status``."""

    def __init__(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.requests: list[httpx2.Request] = []
        self.status = status
        self.headers = headers or {}

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if self.status != 200:
            return httpx2.Response(self.status, headers=self.headers, json={"error": {"message": "slow down"}})
        return httpx2.Response(200, json=ANSWER)


def _sent(request: httpx2.Request) -> tuple:
    return (
        request.method,
        str(request.url),
        request.headers.multi_items(),
        request.content,
        request.extensions.get("timeout"),
    )


@pytest.mark.parametrize("key", [KEY, None])
@pytest.mark.parametrize("timeout", [None, 30.0])
@pytest.mark.parametrize("base_url", ["http://model.test/v1", "http://proxy.test/team/openai/v1/"])
async def test_the_prepared_request_is_the_one_the_sdks_post_sends(key, timeout, base_url):
    recorder = Recorder()
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        provider = OpenAIProvider(http, base_url=base_url, api_key=SecretStr(key) if key else None, timeout=timeout)
        answer = await provider.complete(REQUEST)
        await provider.complete(REQUEST)  # the second call sends from the kept template
        assert provider._post.prepared
        await provider._client.post(
            CHAT_COMPLETIONS_PATH, cast_to=httpx2.Response, content=request_body(REQUEST), options=provider._options
        )
    first, second, by_sdk = recorder.requests
    assert answer.message.content == "hi"
    assert _sent(first) == _sent(second) == _sent(by_sdk)
    assert ("authorization" in first.headers) == bool(key)


@pytest.mark.parametrize("status, retryable", [(429, True), (503, True), (400, False), (401, False)])
async def test_an_error_status_is_the_sdks_error_and_classified_the_same(status, retryable):
    recorder = Recorder(status, {"retry-after": "7"})
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        provider = OpenAIProvider(http, base_url="http://model.test/v1", api_key=SecretStr(KEY))
        with pytest.raises(openai.APIStatusError) as prepared:
            await provider._post.send(request_body(REQUEST))
        with pytest.raises(openai.APIStatusError) as by_sdk:
            await provider._client.post(
                CHAT_COMPLETIONS_PATH, cast_to=httpx2.Response, content=request_body(REQUEST), options=provider._options
            )
    assert type(prepared.value) is type(by_sdk.value)
    ours, theirs = (classify_sdk_error("openai", e.value, [KEY]) for e in (prepared, by_sdk))
    assert (type(ours), ours.status, str(ours)) == (type(theirs), theirs.status, str(theirs))
    assert isinstance(ours, RetryableProviderError) == retryable
    if retryable:
        assert ours.retry_after == theirs.retry_after == 7.0


async def test_a_client_whose_key_changes_per_call_is_posted_by_the_sdk_each_time():
    # A key provider (here rotating keys) makes each call's headers differ: a kept request would
    # send the first key for ever.
    keys = iter(["sk-rotated-1", "sk-rotated-2"])

    async def next_key() -> str:
        return next(keys)

    recorder = Recorder()
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        client = openai.AsyncOpenAI(api_key=next_key, base_url="http://model.test/v1", http_client=http, max_retries=0)
        post = PreparedPost(client, http, CHAT_COMPLETIONS_PATH, {}, _options_class())
        await post.send(request_body(REQUEST))
        await post.send(request_body(REQUEST))
        assert not post.prepared
    assert [r.headers["authorization"] for r in recorder.requests] == ["Bearer sk-rotated-1", "Bearer sk-rotated-2"]


async def test_an_sdk_without_the_internals_it_builds_with_posts_through_its_own_post():
    recorder = Recorder()
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        client = openai.AsyncOpenAI(api_key=KEY, base_url="http://model.test/v1", http_client=http, max_retries=0)
        moved = PreparedPost(client, http, CHAT_COMPLETIONS_PATH, {}, None)
        kept = PreparedPost(client, http, CHAT_COMPLETIONS_PATH, {}, _options_class())
        for post in (moved, kept):
            assert json.loads((await post.send(request_body(REQUEST))).content) == ANSWER
        assert (moved.prepared, kept.prepared) == (False, True)
    assert _sent(recorder.requests[0]) == _sent(recorder.requests[1])


def _options_class() -> type:
    from openai._models import FinalRequestOptions

    return FinalRequestOptions


async def test_a_request_is_kept_per_call_timeout_and_a_timeout_new_on_every_call_is_built_by_the_sdk():
    # Anthropic's SDK derives a timeout per call: each one gets its own kept request (the timeout is in its
    # x-stainless headers and the transport's extensions), up to a few; past them the SDK builds each request.
    from anthropic._models import FinalRequestOptions

    recorder = Recorder()
    timeouts = [10.0, httpx2.Timeout(600, connect=5.0), 10.0, None, 20.0, 30.0, 40.0]
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)) as http:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url="http://model.test", http_client=http, max_retries=0)
        post = PreparedPost(client, http, "/v1/messages", {}, FinalRequestOptions)
        for timeout in timeouts:
            await post.send(b'{"model":"m"}', timeout)
        assert len(post._kept) == PreparedPost._MAX_KEPT == 4 and post.prepared
        for timeout in timeouts:
            await client.post(
                "/v1/messages", cast_to=httpx2.Response, content=b'{"model":"m"}', options={"timeout": timeout}
            )
    kept, by_sdk = recorder.requests[: len(timeouts)], recorder.requests[len(timeouts) :]
    assert [_sent(r) for r in kept] == [_sent(r) for r in by_sdk]
    assert [r.headers["x-stainless-timeout"] for r in kept] == ["10.0", "600", "10.0", "None", "20.0", "30.0", "40.0"]
    assert [r.extensions["timeout"]["read"] for r in kept] == [10.0, 600, 10.0, None, 20.0, 30.0, 40.0]
