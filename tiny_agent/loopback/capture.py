"""What the loopback server keeps of a request (no secret: credentials as fingerprints only) and the rules of each wire
API it checks it against, the first broken one a one-line :class:`Violation` (docs/loopback.md, *What the server keeps*,
*Validation*).  Pure: no I/O."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, quote, urlsplit

import msgspec

from tiny_agent.journal.canonical import sha256_digest
from tiny_agent.journal.secrets import is_secret_parameter
from tiny_agent.wire.registry import Api

CREDENTIAL_HEADERS: Final = frozenset(("authorization", "x-api-key", "api-key", "proxy-authorization"))

_KEY_LOOKING: Final = re.compile(
    r"(?:\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,})"  # OpenAI, Anthropic (sk-ant-...), OpenRouter (sk-or-...)
    r"|(?:\bBearer\s+\S{8,})"
    r"|(?=[A-Za-z0-9_\-]*[0-9])(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{32,}"  # a long token of letters and digits
)


class RecordedRequest(msgspec.Struct, frozen=True):
    """docs/loopback.md, "What the server keeps": a credential's value is its fingerprint, in ``path`` and ``headers``."""

    path: str
    headers: dict[str, str]
    body: Any
    authorized: bool
    api: Api | None = None
    fingerprints: dict[str, str] = msgspec.field(default_factory=dict)

    @property
    def header_names(self) -> list[str]:
        return list(self.headers)


def fingerprint(credential: str) -> str:
    """``sha256:`` and the hex digest of the credential's UTF-8 bytes."""
    return sha256_digest(credential.encode("utf-8"))


def record(path: str, headers: Iterable[tuple[str, str]], raw: bytes, api: Api | None) -> RecordedRequest:
    """The request as the server keeps it: no credential in any member."""
    kept: dict[str, str] = {}
    fingerprints: dict[str, str] = {}
    for name, value in headers:
        lower = name.lower()
        if lower in CREDENTIAL_HEADERS or _KEY_LOOKING.search(value):
            kept[lower], fingerprints[lower] = _hidden(value)
        else:
            kept[lower] = value
    return RecordedRequest(
        path=_safe_path(path),
        headers=kept,
        body=_json_or_none(raw),
        authorized=any(name in CREDENTIAL_HEADERS for name in fingerprints),
        api=api,
        fingerprints=fingerprints,
    )


def _hidden(value: str) -> tuple[str, str]:
    """What is shown for a credential header (its scheme, if any, and the fingerprint), and the fingerprint."""
    scheme, space, credential = value.strip().partition(" ")
    if space and scheme.isalpha() and credential.strip():
        digest = fingerprint(credential.strip())
        return f"{scheme} {digest}", digest
    digest = fingerprint(value.strip())
    return digest, digest


def _safe_path(target: str) -> str:
    parts = urlsplit(target)
    if not parts.query:
        return target
    pairs = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if is_secret_parameter(name, value) or _KEY_LOOKING.search(value):
            value = fingerprint(value)
        pairs.append(f"{quote(name, safe='')}={quote(value, safe=':')}")
    return f"{parts.path}?{'&'.join(pairs)}"


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


Rule = Literal[
    "route",
    "api",
    "json",
    "script",
    "messages",
    "transcript",
    "max_tokens",
    "version",
    "credentials",
    "alternation",
    "tool_result",
    "store",
    "previous_response_id",
    "input",
    "function_call_output",
]


class Violation(msgspec.Struct, frozen=True):
    rule: Rule
    message: str
    request: int = -1
    api: Api | None = None


def violation_of(request: RecordedRequest) -> Violation | None:
    """The first rule the request breaks for its route's API (a route without an API breaks none here)."""
    if request.api is None:
        return None
    if type(request.body) is not dict:
        return Violation("json", "the request body is not a JSON object")
    return _RULES[request.api](request.body, request.headers)


def _ids(items: Any) -> set[str]:
    """The string ``id`` of each object in ``items``."""
    if type(items) is not list:
        return set()
    return {item["id"] for item in items if type(item) is dict and type(item.get("id")) is str}


def _listed(ids: set[str]) -> str:
    return ", ".join(sorted(ids))


def _turns(body: dict[str, Any]) -> list[tuple[str, Any, Any]] | Violation:
    """``(where, role, message)`` of each of a non-empty ``messages``."""
    messages = body.get("messages")
    if type(messages) is not list or not messages:
        return Violation("messages", "messages must be a non-empty array")
    return [(f"messages[{index}]", turn.get("role") if type(turn) is dict else None, turn) for index, turn in enumerate(messages)]


_CHAT_ROLES: Final = frozenset(("system", "developer", "user", "assistant", "tool"))


def _chat(body: dict[str, Any], headers: Mapping[str, str]) -> Violation | None:
    turns = _turns(body)
    if isinstance(turns, Violation):
        return turns
    pending: set[str] = set()
    for where, role, message in turns:
        if role not in _CHAT_ROLES:
            return Violation("messages", f"{where}.role is {role!r}, not a known role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                left = "which no call of the assistant message before it left open"
                return Violation("transcript", f"{where} answers {call_id!r}, {left}")
            pending.discard(call_id)
        elif pending:
            return Violation("transcript", f"{where} ({role}) comes while calls are unanswered: {_listed(pending)}")
        elif role == "assistant":
            pending = _ids(message.get("tool_calls"))
    if pending:
        return Violation("transcript", f"the conversation ends with calls unanswered: {_listed(pending)}")
    return None


def _anthropic(body: dict[str, Any], headers: Mapping[str, str]) -> Violation | None:
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is not int or max_tokens < 1:
        return Violation("max_tokens", f"max_tokens is {max_tokens!r}: a positive integer is required")
    if "anthropic-version" not in headers:
        return Violation("version", "the anthropic-version header is missing")
    if "authorization" in headers:
        return Violation("credentials", "the credential came in Authorization; Anthropic reads it from x-api-key")
    turns = _turns(body)
    if isinstance(turns, Violation):
        return turns
    open_uses: set[str] = set()
    for index, (where, role, turn) in enumerate(turns):
        expected = "user" if index % 2 == 0 else "assistant"
        if role != expected:
            return Violation(
                "alternation", f"{where}.role is {role!r}; roles alternate strictly from user, so {expected!r} is due"
            )
        content = turn.get("content")
        blocks = [{"type": "text", "text": content}] if type(content) is str else content
        if type(blocks) is not list or not all(type(block) is dict for block in blocks):
            return Violation("messages", f"{where}.content must be a string or an array of blocks")
        if role == "assistant":
            open_uses = _ids([block for block in blocks if block.get("type") == "tool_use"])
            continue
        # The user turn after an assistant turn: its tool_result blocks come first and answer every open tool_use.
        answered: set[str] = set()
        seen_other = False
        for place, block in enumerate(blocks):
            if block.get("type") != "tool_result":
                seen_other = True
                continue
            use_id = block.get("tool_use_id")
            if use_id not in open_uses or use_id in answered:
                return Violation(
                    "tool_result", f"{where}.content[{place}] answers {use_id!r}, no open tool_use of the turn before"
                )
            if seen_other:
                return Violation("tool_result", f"{where}.content[{place}]: tool_result blocks must come before any other block")
            answered.add(use_id)
        if open_uses - answered:
            return Violation("tool_result", f"{where} leaves tool_use unanswered: {_listed(open_uses - answered)}")
        open_uses = set()
    if open_uses:
        return Violation("tool_result", f"the conversation ends with tool_use unanswered: {_listed(open_uses)}")
    return None


def _responses(body: dict[str, Any], headers: Mapping[str, str]) -> Violation | None:
    if body.get("store") is not False:
        return Violation("store", f"store is {body.get('store', 'missing')!r}: tiny-agent is stateless, store must be false")
    if body.get("previous_response_id") is not None:
        return Violation("previous_response_id", "previous_response_id is set: a stateless request sends the whole conversation")
    items = body.get("input")
    if type(items) is not list:
        return Violation("input", "input must be an array of items")
    calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type") if type(item) is dict else None
        call_id = item.get("call_id") if type(item) is dict else None
        if kind == "function_call" and type(call_id) is str:
            calls.add(call_id)
        elif kind == "function_call_output":
            if call_id not in calls or call_id in answered:
                left = "which no earlier function_call left open"
                return Violation("function_call_output", f"input[{index}] answers {call_id!r}, {left}")
            answered.add(call_id)
    if calls - answered:
        return Violation("function_call_output", f"the input ends with function calls unanswered: {_listed(calls - answered)}")
    return None


_RULES: Final[dict[Api, Callable[[dict[str, Any], Mapping[str, str]], Violation | None]]] = {
    "chat": _chat,
    "anthropic": _anthropic,
    "responses": _responses,
}
