"""Quirk adapters: small, named, versioned rewrites of a Chat Completions body before the seam (one of a request).

The rules: docs/provider.md, "Quirk adapters" (``reasoning-apart-from-output`` rewrites ``usage``, the others
messages); containers on a changed path are copied.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from tiny_agent.errors import ConfigError
from tiny_agent.wire.seam import Change, ChangeKind

MessageRewrite = Callable[[dict[str, Any], str, str], tuple[dict[str, Any], list[Change]]]
"""``(message, path of the message, adapter reference) -> (message, changes)``; the same object when unchanged."""

CallRewrite = tuple[dict[str, Any], str, ChangeKind, str]
"""A rewritten call, the changed member's path inside the call, and the change's kind and detail."""

CallRewriter = Callable[[Any], CallRewrite | None]


class Adapter(msgspec.Struct, frozen=True):
    name: str
    version: int
    summary: str
    rewrite: MessageRewrite

    @property
    def reference(self) -> str:
        return f"{self.name}@{self.version}"


ADAPTERS: Final[list[Adapter]] = []


def _adapter(name: str, version: int, summary: str) -> Callable[[MessageRewrite], MessageRewrite]:
    def declare(rewrite: MessageRewrite) -> MessageRewrite:
        ADAPTERS.append(Adapter(name, version, summary, rewrite))
        return rewrite

    return declare


def _call_adapter(name: str, version: int, summary: str) -> Callable[[CallRewriter], CallRewriter]:
    """Declares a rewrite of each of a message's tool calls (None: that call stays as it is)."""

    def declare(rewrite: CallRewriter) -> CallRewriter:
        _adapter(name, version, summary)(lambda message, where, ref: _rewrite_calls(message, where, ref, rewrite))
        return rewrite

    return declare


# -- the adapters ---------------------------------------------------------------


@_adapter("absent-content-is-null", 1, "a message without content gets content: null (Groq, Azure, Mistral with tool calls)")
def _absent_content_is_null(message: dict[str, Any], where: str, ref: str) -> tuple[dict[str, Any], list[Change]]:
    if "content" in message:
        return message, []
    change = Change(ref, f"{where}.content", "added", "no content member; added content: null")
    return {**message, "content": None}, [change]


@_adapter("empty-tool-calls-is-none", 1, "tool_calls: [] is removed (vLLM sends it with ordinary answers)")
def _empty_tool_calls_is_none(message: dict[str, Any], where: str, ref: str) -> tuple[dict[str, Any], list[Change]]:
    calls = message.get("tool_calls")
    if type(calls) is not list or calls:
        return message, []
    rewritten = {key: value for key, value in message.items() if key != "tool_calls"}
    return rewritten, [Change(ref, f"{where}.tool_calls", "removed", "removed an empty tool_calls array")]


@_call_adapter("missing-call-type-is-function", 1, 'a tool call without type gets type: "function" (Mistral)')
def _call_with_type(call: Any) -> CallRewrite | None:
    if type(call) is not dict or "type" in call:
        return None
    # Keep the call's own member order; "type" is simply appended.
    return {**call, "type": "function"}, "type", "added", 'no type member; added type: "function"'


@_adapter(
    "content-parts-to-text",
    1,
    "a list content becomes the concatenated text of its text parts; other parts are dropped (Mistral)",
)
def _content_parts_to_text(message: dict[str, Any], where: str, ref: str) -> tuple[dict[str, Any], list[Change]]:
    parts = message.get("content")
    if type(parts) is not list:
        return message, []
    texts: list[str] = []
    for part in parts:
        if type(part) is not dict or type(part.get("type")) is not str:
            return message, []
        if part["type"] != "text":
            continue
        text = part.get("text")
        if type(text) is not str:
            return message, []
        texts.append(text)
    dropped = len(parts) - len(texts)
    content = "".join(texts) if texts else None
    shown = "null" if content is None else f"the text of {len(texts)} text part(s)"
    detail = f"a list of {len(parts)} part(s) became {shown}; {dropped} other part(s) dropped"
    return {**message, "content": content}, [Change(ref, f"{where}.content", "replaced", detail)]


@_call_adapter(
    "object-arguments-to-json",
    1,
    "object arguments become their compact JSON text, member order and non-ASCII kept (llama.cpp)",
)
def _call_with_text_arguments(call: Any) -> CallRewrite | None:
    text = _arguments_text(call)
    if text is None:
        return None
    function = {**call["function"], "arguments": text}
    return {**call, "function": function}, "function.arguments", "replaced", "an object became its compact JSON text"


@_adapter("missing-role-is-assistant", 1, 'a message without role gets role: "assistant" (Mistral streams send none)')
def _missing_role_is_assistant(message: dict[str, Any], where: str, ref: str) -> tuple[dict[str, Any], list[Change]]:
    if "role" in message:
        return message, []
    return {"role": "assistant", **message}, [Change(ref, f"{where}.role", "added", 'no role member; added role: "assistant"')]


@_adapter("null-content-as-empty", 1, 'requests only: an assistant message\'s null content is sent as "" (llama-cpp-python)')
def _null_content_as_empty(message: dict[str, Any], where: str, ref: str) -> tuple[dict[str, Any], list[Change]]:
    """Answers pass as they are: the request builder reads this adapter (RequestOptions.empty_content)."""
    return message, []


EMPTY_CONTENT: Final = ADAPTERS[-1].reference


@_adapter("reasoning-apart-from-output", 1, "usage: reasoning_tokens are added to completion_tokens, which exclude them (xAI)")
def _reasoning_apart_from_output(message: dict[str, Any], where: str, ref: str) -> tuple[dict[str, Any], list[Change]]:
    """Messages pass as they are: :func:`_reasoning_into_output` rewrites the usage."""
    return message, []


REASONING_APART: Final = ADAPTERS[-1]


def _reasoning_into_output(body: Any, ref: str, changes: list[Change]) -> Any:
    """``usage.completion_tokens`` plus ``completion_tokens_details.reasoning_tokens``: what the provider billed as output."""
    usage = body.get("usage") if type(body) is dict else None
    if type(usage) is not dict:
        return body
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if type(details) is dict else None
    completion = usage.get("completion_tokens")
    if type(reasoning) is not int or type(completion) is not int or reasoning <= 0 or completion < 0:
        return body
    total = completion + reasoning
    detail = f"{completion} + reasoning_tokens {reasoning} = {total} (the provider counts reasoning apart from it)"
    changes.append(Change(ref, "usage.completion_tokens", "replaced", detail))
    return {**body, "usage": {**usage, "completion_tokens": total}}


def _rewrite_calls(message: dict[str, Any], where: str, ref: str, rewrite: CallRewriter) -> tuple[dict[str, Any], list[Change]]:
    changes: list[Change] = []

    def one(index: int, call: Any) -> Any:
        rewritten = rewrite(call)
        if rewritten is None:
            return call
        new_call, member, kind, detail = rewritten
        changes.append(Change(ref, f"{where}.tool_calls[{index}].{member}", kind, detail))
        return new_call

    calls = _each(message.get("tool_calls"), one)
    return (message, []) if calls is None else ({**message, "tool_calls": calls}, changes)


def _each(items: Any, rewrite: Callable[[int, Any], Any]) -> list[Any] | None:
    """``rewrite(index, item)`` over a list (the same item when unchanged): the new list; None when nothing changed."""
    if type(items) is not list:
        return None
    rewritten = [rewrite(index, item) for index, item in enumerate(items)]
    return None if all(new is old for new, old in zip(rewritten, items, strict=True)) else rewritten


def _arguments_text(call: Any) -> str | None:
    if type(call) is not dict:
        return None
    function = call.get("function")
    if type(function) is not dict or type(function.get("arguments")) is not dict:
        return None
    try:
        # msgspec keeps member order and writes non-ASCII as UTF-8, not \u escapes.
        return msgspec.json.encode(function["arguments"]).decode("utf-8")
    except (msgspec.EncodeError, UnicodeEncodeError, OverflowError, TypeError):
        # A value no JSON text can hold (a lone surrogate, say): leave it for the seam to reject.
        return None


ADAPTER_NAMES: Final[tuple[str, ...]] = tuple(adapter.name for adapter in ADAPTERS)
_BY_REFERENCE: Final[dict[str, Adapter]] = {
    **{adapter.name: adapter for adapter in ADAPTERS},
    **{adapter.reference: adapter for adapter in ADAPTERS},
}


def find_adapter(reference: str) -> Adapter:
    adapter = _BY_REFERENCE.get(reference)
    if adapter is None:
        raise ConfigError(f"unknown adapter {reference!r} (known: {', '.join(ADAPTER_NAMES)})")
    return adapter


def is_known_adapter(reference: str) -> bool:
    return reference in _BY_REFERENCE


# -- applying them ----------------------------------------------------------------


def apply(body: Any, adapter_names: Sequence[str]) -> tuple[Any, list[Change]]:
    """The body after the named adapters, in order (the same object when unchanged), and every change made.

    Raises ``ConfigError`` only for an unknown adapter name, never for the body.
    """
    adapters = [find_adapter(name) for name in adapter_names]
    changes: list[Change] = []
    for adapter in adapters:
        if adapter is REASONING_APART:
            body = _reasoning_into_output(body, adapter.reference, changes)
        else:
            body = _rewrite_messages(body, adapter, changes)
    return body, changes


def _rewrite_messages(body: Any, adapter: Adapter, changes: list[Change]) -> Any:
    def one(index: int, choice: Any) -> Any:
        message = choice.get("message") if type(choice) is dict else None
        if type(message) is not dict:
            return choice
        rewritten, made = adapter.rewrite(message, f"choices[{index}].message", adapter.reference)
        changes.extend(made)
        return choice if rewritten is message else {**choice, "message": rewritten}

    choices = _each(body.get("choices"), one) if type(body) is dict else None
    return body if choices is None else {**body, "choices": choices}
