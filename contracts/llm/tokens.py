"""Offline prompt-token counting for the context-window precondition.

Counted with o200k_base from ``bpe-openai``, whose vocabulary ships inside the
wheel, so nothing is downloaded at run time. Other providers tokenize
differently; o200k_base is a close, deterministic estimate for all of them.

The per-message overhead follows OpenAI's cookbook ("How to count tokens with
tiktoken"): 3 tokens frame each message, 1 more when it carries a ``name``, and
3 prime the reply. Tools and tool calls have no published formula; they are
counted as the JSON the provider receives plus a small frame.
"""

from __future__ import annotations

import hashlib
import json
import threading
import warnings
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .messages import Message
from .prefix import Folds, fold
from .request import LLMRequest
from .tools import ToolSchema

if TYPE_CHECKING:
    from bpe_openai import Encoding

ENCODING_NAME = "o200k_base"
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
TOKENS_PER_TOOL_CALL = 3
TOKENS_PER_TOOL = 8
# bpe-openai refuses texts of 1M characters or more than 200k tokens per call;
# 40k characters stay below both even at 4 tokens per character.
_CHUNK_CHARS = 40_000

# Every llm.call re-checks the whole history, so the same texts (tool results
# above all) are counted again at each step. Counts are memoised by a digest
# of the text, not the text itself, so the memo never pins large payloads.
_MEMO_SIZE = 4096

_encoding: Encoding | None = None
_lock = threading.Lock()
_memo: OrderedDict[bytes, int] = OrderedDict()


def encoding() -> Encoding:
    """The o200k_base encoding, loaded once (about half a second) on first use."""
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                # Imported here so importing contracts (also inside the
                # workflow sandbox) never loads the native tokenizer.
                # bpe-openai 0.1.4 reads its bundled vocabulary with the
                # deprecated importlib.resources.open_binary; that warning is
                # theirs and says nothing to our users.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    import bpe_openai

                    _encoding = bpe_openai.get_encoding(ENCODING_NAME)
    return _encoding


def count_text_tokens(text: str | None) -> int:
    """Tokens in ``text``; special-token markers such as ``<|endoftext|>`` count as plain text."""
    if not text:
        return 0
    key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with _lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]
    enc = encoding()
    count = sum(len(enc.encode_ordinary(text[i : i + _CHUNK_CHARS])) for i in range(0, len(text), _CHUNK_CHARS))
    with _lock:
        _memo[key] = count
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
    return count


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):
        return _flatten(value)


def _flatten(value: Any) -> str:
    """Keys and scalars joined by spaces, walked without recursion: too deep for ``json.dumps``."""
    pieces: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            pieces.extend(str(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            pieces.append(str(item))
    return " ".join(pieces)


def count_message_tokens(message: Message) -> int:
    total = TOKENS_PER_MESSAGE + count_text_tokens(message.role) + count_text_tokens(message.content)
    if message.name:
        total += TOKENS_PER_NAME + count_text_tokens(message.name)
    if message.tool_call_id:
        total += count_text_tokens(message.tool_call_id)
    for call in message.tool_calls:
        total += (
            TOKENS_PER_TOOL_CALL
            + count_text_tokens(call.id)
            + count_text_tokens(call.name)
            + count_text_tokens(call.arguments)
        )
    return total


def count_tool_tokens(tool: ToolSchema) -> int:
    described = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return TOKENS_PER_TOOL + count_text_tokens(_dumps(described))


def _bytes(text: str | None) -> int:
    if not text:
        return 0
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def message_bytes(m: Message) -> int:
    """``count_message_tokens``' bound: every text counted as its UTF-8 bytes."""
    total = TOKENS_PER_MESSAGE + _bytes(m.role) + _bytes(m.content) + _bytes(m.tool_call_id)
    if m.name:
        total += TOKENS_PER_NAME + _bytes(m.name)
    for call in m.tool_calls:
        total += TOKENS_PER_TOOL_CALL + _bytes(call.id) + _bytes(call.name) + _bytes(call.arguments)
    return total


def prompt_tokens_upper_bound(request: LLMRequest, folds: Folds | None = None) -> int:
    """A bound ``count_prompt_tokens`` never exceeds, in time linear in the prompt's bytes.

    Every BPE token stands for at least one byte of its text, so a text has at
    most as many tokens as UTF-8 bytes. Most requests are far below their
    window, and this lets the precondition skip tokenizing the whole history
    again at every step. The messages' part is a sum, resumed from a stored prefix's (``folds``).
    """
    total = REPLY_PRIMING + fold(folds, "tokens.bound", request.messages, int, lambda n, m: n + message_bytes(m))
    for tool in request.tools:
        described = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
        total += TOKENS_PER_TOOL + _bytes(_dumps(described))
    if request.response_format is not None:
        total += _bytes(_dumps(request.response_format.json_schema))
    return total


def count_prompt_tokens(request: LLMRequest, folds: Folds | None = None) -> int:
    """Estimated prompt tokens of ``request``: messages, tool definitions and response schema."""
    total = REPLY_PRIMING
    total += fold(folds, "tokens.count", request.messages, int, lambda n, m: n + count_message_tokens(m))
    total += sum(count_tool_tokens(t) for t in request.tools)
    if request.response_format is not None:
        total += count_text_tokens(_dumps(request.response_format.json_schema))
    return total
