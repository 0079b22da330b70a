"""The typed LLM call: LLMRequest -> LLMResponse, as in the first seed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ..violations import Violation
from .api_keys import DEFAULT_API_KEY
from .conversation import ConversationRef
from .messages import LLMToolCall, Message
from .tool_catalog import ToolCatalogRef
from .tools import ToolSchema

Provider = Literal["openai", "anthropic"]


class LLMConfig(BaseModel):
    provider: Provider = "openai"
    model: str
    """A pinned model version; ``latest`` and bare aliases fail the precondition."""
    temperature: float | None = None
    """Unset means the model's own default and nothing is sent. A set value is
    checked by the precondition (``[0, 2]``, then the model's capability in the
    worker's table) and sent as it is, never silently changed."""
    max_tokens: int = 1024
    context_window: int = 128_000
    api_key: str = Field(default=DEFAULT_API_KEY, exclude_if=lambda name: name == DEFAULT_API_KEY)
    """The NAME of the worker's key of ``provider`` this call is sent (and its quota counted) with
    (``[worker.providers] openai_keys``), never the key itself; ``default`` is the provider's own
    (``OPENAI_API_KEY``). Left out of the payload when default: a call without one is the bytes it always was."""


class ResponseFormat(BaseModel):
    """A JSON final answer, validated against ``json_schema``."""

    name: str = "result"
    json_schema: dict[str, Any]


ContextPolicy = Literal["none", "truncate", "summarize"]
"""What ``llm.call`` does with a request that does not fit the window (``contracts/llm/context.py``)."""


class TokenStream(BaseModel):
    """Where a streamed call's text goes: the calling workflow's progress stream, labelled with this."""

    turn: int = 0
    step: int = 0


class LLMRequest(BaseModel):
    config: LLMConfig
    messages: list[Message]
    tools: list[ToolSchema] = Field(default_factory=list)
    tool_names: list[str] | None = None
    """Tools the worker resolves to their schemas before anything else (``tools.describe``'s lookup
    and the spec's tool checks, inside this activity) and sends as ``tools``; the response returns
    them. A one-shot tool-mode run's first call, so the run needs no ``tools.describe`` activity."""
    tools_ref: ToolCatalogRef | None = Field(default=None, exclude_if=lambda ref: ref is None)
    """The run's tool schemas as the catalog its resolving call stored (``LLMResponse.tools_ref``), bound to
    ``owner``: the worker reads them (checked) and sends them as ``tools``, which this request leaves empty.
    So the schemas are in history once, in the first call's result. Left out of the payload when unset."""
    store_tools: bool = Field(default=False, exclude_if=lambda store: not store)
    """A chained request: also store ``tools`` as a catalog bound to ``owner`` and return its ref
    (``LLMResponse.tools_ref``), so every later call names the catalog (a session's first call with its
    schemas: the session keeps the ref, across turns and continue-as-new). A worker before catalogs ignores
    it and returns no ref; the session goes on sending its schemas. Left out of the payload when unset."""
    tool_choice: Literal["auto", "none", "required"] = "auto"
    response_format: ResponseFormat | None = None
    allowed_model_aliases: list[str] = Field(default_factory=list)
    """Unpinned model names the operator allowed explicitly."""
    token_allowance: int | None = None
    """The most tokens (prompt + ``max_tokens``) this call may use: what the run's token budget
    has left. Checked before anything is sent; None when the caller has no budget."""
    conversation: ConversationRef | None = None
    """Messages stored in the payload store that come before ``messages`` (sessions)."""
    chained: bool = False
    """Store the whole message list and return its ``ConversationRef`` (implied by ``conversation``)."""
    owner: str = ""
    """Chained requests: the run or session the conversation belongs to, ``<workflow id>/<first run id>``,
    set by the workflow from its own info. Every segment stored is bound to it, and a chain holding a
    segment bound to another owner is refused (``PayloadIntegrityError``). Empty: an older release's call."""
    stored_messages: dict[int, ConversationRef] = Field(default_factory=dict, exclude_if=lambda refs: not refs)
    """Index in ``messages`` -> the one-message segment a ``tools.call`` stored for it (bound to ``owner``):
    that message is sent as a placeholder without content, and the activity puts the stored one, checked
    to answer the same call, in its place. So a tool result is in history once."""
    context_policy: ContextPolicy = "none"
    tenant: str | None = Field(default=None, exclude_if=lambda tenant: tenant is None)
    """For ``llm.call.plan_first`` (a run's first call, its quota plan unknown): the tenant whose plan the
    worker looks up before anything is sent (None: ``default``). Left out of the payload when unset."""
    stream: TokenStream | None = None
    """Call the provider with streaming and publish the answer's text, batched, on the calling
    workflow's progress stream (sessions with ``stream_tokens``). Advisory: a retried call streams
    again, and the returned (completed) message is what the contracts check."""


class Usage(BaseModel):
    prompt_tokens: int = 0
    """Every input token, cached or not: budgets and the context window count them all."""
    completion_tokens: int = 0
    """Every output token, reasoning included."""
    total_tokens: int = 0
    cache_read_tokens: int = 0
    """Part of ``prompt_tokens`` served from the provider's prompt cache (priced lower)."""
    cache_write_tokens: int = 0
    """Part of ``prompt_tokens`` written to the prompt cache (Anthropic prices these higher)."""
    reasoning_tokens: int = 0
    """Part of ``completion_tokens`` the model spent thinking."""

    def billable(self) -> Usage:
        """Prompt + completion, negatives as 0: an inconsistent reported total is a
        postcondition violation, never what a budget is charged."""
        prompt, completion = max(self.prompt_tokens, 0), max(self.completion_tokens, 0)
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            cache_read_tokens=min(max(self.cache_read_tokens, 0), prompt),
            cache_write_tokens=min(max(self.cache_write_tokens, 0), prompt),
            reasoning_tokens=min(max(self.reasoning_tokens, 0), completion),
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ContextAction(BaseModel):
    """What a context policy did to one request (reported on its step and in metrics)."""

    action: Literal["truncated", "summarized"]
    dropped_messages: int
    usage: Usage = Field(default_factory=Usage)
    """Tokens the summary call used (billed to the run)."""
    note: str = ""


FinishReason = Literal[
    "stop", "tool_calls", "length", "content_filter", "refusal", "context_window_exceeded", "pause_turn", "other"
]
"""Why the model stopped. Only ``stop`` and ``tool_calls`` are final answers;
each other reason is a postcondition violation of its own kind."""


class LLMResponse(BaseModel):
    message: Message
    """The assistant message, possibly carrying ``tool_calls``."""
    usage: Usage = Field(default_factory=Usage)
    finish_reason: FinishReason = "stop"
    provider: Provider = "openai"
    model: str = ""
    """The model the provider says it served; the ``served_model`` postcondition compares it with the pin."""
    refusal: str | None = None
    """The provider's refusal text (OpenAI ``message.refusal``, Anthropic's refusal explanation)."""
    violations: list[Violation] = Field(default_factory=list)
    """Postcondition violations, returned as values for the workflow to handle."""
    conversation: ConversationRef | None = None
    """For a chained request: the stored request messages (not this answer)."""
    context: ContextAction | None = None
    """Set when the context policy compacted the request."""
    tools: list[ToolSchema] | None = None
    """For a request with ``tool_names``: the schemas they resolved to, which the run keeps."""
    tools_ref: ToolCatalogRef | None = Field(default=None, exclude_if=lambda ref: ref is None)
    """For a chained request with ``tool_names`` or ``store_tools``: the schemas stored as a catalog bound to the
    run (or session), which its later calls name instead of carrying them. Set by workers since tool catalogs; a run
    whose first call's result has none (an older worker, a recorded history) sends the schemas as before."""
    cost_usd: float = 0.0
    """This call priced by the worker's price table (the summary a context policy asked for included)."""
    throttled: int = 0
    """Attempts of this call the provider answered 429 before this one (its quota account learns of them)."""

    @property
    def tool_calls(self) -> tuple[LLMToolCall, ...]:
        return self.message.tool_calls
