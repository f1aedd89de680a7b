"""What every wire API shares: :class:`WireApi`, the outcome types, and the seam's tools (docs/normalize.md).

Pure: no I/O.  Values come from providers: nothing here raises out of a seam, whatever they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, Literal, Protocol

import msgspec

from tiny_agent.journal.json_profile import MAX_SAFE_INTEGER, LineDecoder, ProfileViolation
from tiny_agent.journal.transcript import AssistantMessage, StopReason, ToolCall, Usage
from tiny_agent.wire.request import Messages, RequestOptions, Tools, WireRequest
from tiny_agent.wire.sse import DONE, stream_events

MISSING: Final = object()
"""Stands for a member that is absent (``container.get(key, MISSING)``), as opposed to ``null``."""

DROPPED: Final = object()
"""In a kept shape: a member of which nothing is kept (listed whole)."""


# -- outcomes -----------------------------------------------------------------


class UsageDerivation(Protocol):
    """How one API's usage object became the ledger's counters (each API has its own)."""

    @property
    def usage(self) -> Usage | None:
        """The ledger's counters; None when the body reported no usage (not zero: not reported)."""
        ...

    @property
    def cost(self) -> float | None: ...

    def explain(self) -> str: ...


class NotReported(msgspec.Struct, frozen=True, tag_field="api", tag="none"):
    """A body with no usage object (absent or null), in any API: not reported, never a count of 0."""

    usage: ClassVar[None] = None
    cost: ClassVar[None] = None

    def explain(self) -> str:
        return "no usage reported: n/a (the body has no usage object; not a count of 0)"


class Accepted(msgspec.Struct, frozen=True):
    message: AssistantMessage
    stop_reason: StopReason
    usage: Usage | None
    derivation: UsageDerivation
    dropped: list[str]
    """JSON paths of the members the canonical result was not built from, in document order."""
    finish_reason: str | None
    """The API's own word for why the answer ended (:meth:`Seam.finish_reason`)."""
    response_id: str | None = None
    model: str | None = None
    hosted: list[str] = msgspec.field(default_factory=list)
    """The provider's own (hosted) tool calls and results, one line each: never sent back, never run by us."""


class Rejected(msgspec.Struct, frozen=True):
    reason: str
    usage: Usage | None
    """What the provider reported before or despite the rejection: paid tokens are ledgered once (None: nothing)."""
    derivation: UsageDerivation
    finish_reason: str | None = None
    response_id: str | None = None
    model: str | None = None


Outcome = Accepted | Rejected


class Reassembly(msgspec.Struct, frozen=True):
    """A stream put back together as the one body the API would have sent whole (docs/normalize.md, "Streams")."""

    body: dict[str, Any] | None
    problem: str | None
    event_count: int
    """Complete events in the stream (an unfinished last event is not one)."""
    byte_size: int
    not_carried: list[str]


class NormalizedStream(msgspec.Struct, frozen=True):
    outcome: Outcome
    reassembly: Reassembly


ChangeKind = Literal["added", "removed", "replaced"]


class Change(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One rewrite a quirk adapter (``name@version``) made at a path, for audit: what was there and what is now."""

    adapter: str
    path: str
    kind: ChangeKind
    detail: str


# -- the protocol ---------------------------------------------------------------

RequestBuilder = Callable[[str, str, Messages, Tools, RequestOptions], WireRequest]
"""``(model, system prompt, messages, tools, options) -> request``."""


class Seam(Protocol):
    """One API's seam rules (its ``seam`` module satisfies this)."""

    def read_usage(self, usage: dict[str, Any], problems: list[str]) -> UsageDerivation:
        """The derivation from the body's usage object (empty when it is not one): an unreadable counter counts as 0 and
        adds its problem to ``problems``."""
        ...

    def finish_reason(self, body: dict[str, Any]) -> Any: ...

    def answer(self, body: Any) -> tuple[AssistantMessage, StopReason]:
        """The rules, then the rebuilt message: raises :class:`Reject` at the first broken rule."""
        ...

    def dropped_paths(self, body: Any, derivation: Any) -> list[str]: ...

    def activity(self, body: Any) -> list[str]: ...


class WireApi(msgspec.Struct, frozen=True):
    """One wire API, declared once by its subpackage; :mod:`tiny_agent.wire.registry` lists them."""

    identity: str
    """The ``adapterIdentity`` of a response derived by this API with no adapters (``chat-completions:v1``)."""
    request: RequestBuilder
    seam: Seam
    reassemble: Callable[[bytes | str], Reassembly]
    adapt: Callable[[Any, Sequence[str]], tuple[Any, list[Change]]] | None = None
    """The quirk adapters (by name) run on a decoded body before the seam; None: this API has none."""

    def read_usage(self, body: Any) -> tuple[UsageDerivation, str | None]:
        """The body's usage as this API derives it (:class:`NotReported` without a usage object), and its first problem."""
        if type(body) is not dict or body.get("usage") is None:
            return NotReported(), None
        problems: list[str] = []
        derivation = self.seam.read_usage(member_object(body, "usage", "usage", problems), problems)
        return derivation, problems[0] if problems else None

    def normalize(self, body: Any) -> Outcome:
        derivation, usage_problem = self.read_usage(body)
        try:
            message, stop_reason = self.seam.answer(body)
            if usage_problem is not None:
                raise Reject(usage_problem)
        except Reject as rejection:
            return self.rejected(self.explained(rejection.reason, body), body, derivation)
        dropped = self.seam.dropped_paths(body, derivation)
        hosted = self.seam.activity(body)
        return Accepted(message, stop_reason, derivation.usage, derivation, dropped, **self._metadata(body), hosted=hosted)

    def rejected(self, reason: str, body: Any = None, derivation: UsageDerivation | None = None) -> Rejected:
        """A rejection that still ledgers the usage ``body`` (what had arrived) reports (``derivation``: already read)."""
        if derivation is None:
            derivation, _ = self.read_usage(body)
        return Rejected(reason=reason, usage=derivation.usage, derivation=derivation, **self._metadata(body))

    def _metadata(self, body: Any) -> dict[str, Any]:
        if type(body) is not dict:
            return {}
        finish = self.seam.finish_reason(body)
        finish_reason = finish if type(finish) is str else None
        return {"finish_reason": finish_reason, "response_id": text_member(body, "id"), "model": text_member(body, "model")}

    def normalize_body(self, body: bytes | str) -> Outcome:
        try:
            value = decode_body(body)
        except Reject as rejection:
            return self.rejected(rejection.reason)
        return self.normalize(value)

    def normalize_stream(self, stream: bytes | str) -> NormalizedStream:
        reassembly = self.reassemble(stream)
        outcome = self.normalize(reassembly.body) if reassembly.problem is None else self.stream_rejected(stream, reassembly)
        return NormalizedStream(outcome=outcome, reassembly=reassembly)

    def stream_rejected(self, stream: bytes | str, reassembly: Reassembly) -> Rejected:
        """Its problem (:meth:`explained` by its first event), with the usage that had arrived."""
        framed = stream_events(stream)
        first = next((event.data for event in framed[0] if event.data != DONE), "") if isinstance(framed, tuple) else ""
        try:
            value = parse_json(first, "")
        except Reject:
            value = None
        return self.rejected(self.explained(reassembly.problem or "", value), reassembly.body)

    def explained(self, reason: str, value: Any) -> str:
        """The reason, led by the format the server answered in when ``value`` (a body, a first event) is another API's."""
        other = answered_in(value)
        if other is None or other == self.identity:
            return reason
        name, how = FORMATS[other]
        return f"the server answered in the {name} format, not {FORMATS[self.identity][0]}: read it with {how} ({reason})"


FORMATS: Final[dict[str, tuple[str, str]]] = {
    "chat-completions:v1": ("Chat Completions", "--api chat (with --base-url) or a chat provider (--provider openai, ollama...)"),
    "anthropic-messages:v1": ("Anthropic Messages", "--api anthropic (with --base-url) or --provider anthropic"),
    "openai-responses:v1": ("OpenAI Responses", "--api responses (with --base-url) or --provider openai-responses"),
}
"""Each API's name in words, and the flags that read its answers (by ``identity``)."""


def answered_in(value: Any) -> str | None:
    """The identity of the API whose marks ``value`` (a body, a stream's first event) has (docs/normalize.md)."""
    if type(value) is not dict:
        return None
    kind, event = value.get("object"), value.get("type")
    if "choices" in value or kind in ("chat.completion", "chat.completion.chunk"):
        return "chat-completions:v1"
    if event in ("message", "message_start"):
        return "anthropic-messages:v1"
    if kind == "response" or (type(event) is str and event.startswith("response.")):
        return "openai-responses:v1"
    return None


# -- the seam's tools -----------------------------------------------------------


class Reject(Exception):
    """Raised inside a seam to stop at the first broken rule; the seam turns it into a Rejected."""

    def __init__(self, reason: str) -> None:
        # A reason quotes wire text (an error message, a parser's complaint): it stays one line.
        one_line = reason.replace("\r", " ").replace("\n", " ")
        super().__init__(one_line)
        self.reason = one_line


def text_member(body: Any, key: str) -> str | None:
    value = body.get(key) if type(body) is dict else None
    return value if type(value) is str else None


def refusal(message: AssistantMessage, where: str) -> tuple[AssistantMessage, StopReason]:
    """A refusal is an answer whose text is what the model said before it declined; it asks for no tools."""
    if message.tool_calls is not msgspec.UNSET:
        raise Reject(f"{where}: a refusal that also asks for tool calls")
    return message, "refusal"


def rebuild(items: Any, where: str, piece: Callable[[Any, dict[str, Any], str], list[str] | ToolCall | None]) -> AssistantMessage:
    """The canonical message from an array of typed objects (blocks, items): ``piece(type, object, path)``
    gives each one's texts, its call, or None for one that says nothing the message keeps.

    With no text, ``content`` is null when there are calls and ``""`` when there are none.
    """
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, value in enumerate(require_array(items, where)):
        here = f"{where}[{index}]"
        item = require_object(value, here)
        found = piece(item.get("type", MISSING), item, here)
        if isinstance(found, ToolCall):
            calls.append(found)
        elif found is not None:
            texts.extend(found)
    seen: set[str] = set()
    for call in calls:
        if call.id in seen:
            raise Reject(f"{where}: tool call id {short(call.id)} repeats an earlier call id")
        seen.add(call.id)
    text = "".join(texts)
    return AssistantMessage(content=text or None, tool_calls=calls) if calls else AssistantMessage(content=text)


def answer_object(body: Any, shown: Callable[[Any], str]) -> dict[str, Any]:
    """The body as an object that reports no ``error`` (an error body is rejected with its message)."""
    if type(body) is not dict:
        raise Reject(f"response is {shown(body)}, not an object")
    error = body.get("error")
    if error is not None:
        raise Reject(f"provider reported an error: {error_text(error)}")
    return body


def require_text(container: dict[str, Any], key: str, where: str) -> str:
    value = container.get(key, MISSING)
    if type(value) is not str or not value:
        raise Reject(f"{where}.{key} is {describe(value)} (expected a non-empty string)")
    return value


def require_string(container: dict[str, Any], key: str, where: str) -> str:
    """Any string, the empty one too (:func:`require_text` wants a non-empty one)."""
    value = container.get(key, MISSING)
    if type(value) is not str:
        raise Reject(f"{where}.{key} is {describe(value)} (expected a string)")
    return value


def require_object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise Reject(f"{where} is {describe(value)} (expected an object)")
    return value


def require_array(value: Any, where: str) -> list[Any]:
    if type(value) is not list:
        raise Reject(f"{where} is {describe(value)} (expected an array)")
    return value


def compact_json(value: Any, where: str) -> str:
    try:
        return msgspec.json.encode(value).decode("utf-8")
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        # Only a Python value that never came from JSON text gets here (a lone
        # surrogate, a non-string key): a decoded body always encodes.
        raise Reject(f"{where} cannot be written as JSON text") from None


def parse_json(text: str | bytes, where: str) -> Any:
    """Strict JSON (no duplicate keys, no lone surrogates), as the journal reads it."""
    try:
        return LineDecoder().decode(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    except ProfileViolation as error:
        raise Reject(f"{where} is not JSON: {error}") from None


def decode_body(body: bytes | str) -> Any:
    """A whole response body as a JSON value, or a Reject naming why it is not one."""
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if not data.strip():
        raise Reject("response body is empty")
    return parse_json(data, "response body")


def counter(container: dict[str, Any], key: str, where: str, problems: list[str], shown: Shown = "both") -> int:
    """A token counter: absent or null is 0; anything but a safe non-negative integer is a problem (and 0)."""
    value = container.get(key)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        problems.append(f"{where} is {describe(value, shown)} (expected a non-negative integer)")
        return 0
    if value > MAX_SAFE_INTEGER:
        problems.append(f"{where} is {value}, beyond the largest count the journal can hold")
        return 0
    return value


def reasoning_part(source: str, tokens: int | None) -> str:
    """``; reasoning_tokens 196 = reasoning 196 (part of output)``, or nothing when none was reported."""
    return "" if tokens is None else f"; {source} {tokens} = reasoning {tokens} (part of output)"


def reported_cost(usage: dict[str, Any]) -> float | None:
    """The cost a provider reports in its usage (OpenRouter's ``usage.cost``), kept for audit, never added up."""
    cost = usage.get("cost")
    return float(cost) if isinstance(cost, int | float) and type(cost) is not bool else None


def optional_counter(container: dict[str, Any], key: str, where: str, problems: list[str]) -> int | None:
    """A counter that may be unreported: None when absent or null, else as :func:`counter` reads it."""
    return None if container.get(key) is None else counter(container, key, where, problems)


def member_object(container: Any, key: str, where: str, problems: list[str]) -> dict[str, Any]:
    """Absent or null reads as empty, anything but an object is a problem."""
    value = container.get(key) if type(container) is dict else None
    if value is None:
        return {}
    if type(value) is not dict:
        problems.append(f"{where} is {kind(value)} (expected an object)")
        return {}
    return value


def unkept_paths(value: Any, kept: Any, path: str = "") -> list[str]:
    """The JSON paths of members of ``value`` outside the ``kept`` shape, in document order, shallowest first.

    In a shape, ``None`` keeps a member whole, a dict or a list keeps the
    members it names, and :data:`DROPPED` keeps nothing of it.
    """
    out: list[str] = []
    _walk(value, kept, path, out)
    return out


def _walk(value: Any, kept: Any, path: str, out: list[str]) -> None:
    if kept is None:
        return
    if kept is DROPPED:
        out.append(path)
        return
    if type(value) is dict and type(kept) is dict:
        for key, member in value.items():
            child = f"{path}.{key}" if path else key
            if key in kept:
                _walk(member, kept[key], child, out)
            else:
                out.append(child)
    elif type(value) is list and type(kept) is list:
        for index, item in enumerate(value):
            child = f"{path}[{index}]"
            if index < len(kept):
                _walk(item, kept[index], child, out)
            else:
                out.append(child)


class EventGrammar(Protocol):
    """One API's event grammar, fed one event at a time; the first broken rule raises :class:`Reject`."""

    not_carried: list[str]

    def event(self, value: dict[str, Any], where: str, index: int) -> None: ...

    def body(self, events: int) -> dict[str, Any]: ...

    def partial_body(self) -> dict[str, Any] | None:
        """After a problem: the body as far as it arrived (its usage is still paid for)."""
        ...


def reassemble_with(grammar: EventGrammar, stream: bytes | str) -> Reassembly:
    """An event stream whose events are typed JSON objects (Anthropic, Responses), read by ``grammar``."""
    framed = stream_events(stream)
    if isinstance(framed, str):
        return Reassembly(body=None, problem=framed, event_count=0, byte_size=len(stream), not_carried=[])
    events, size = framed
    if events and events[-1].data == DONE:
        events.pop()
    try:
        for index, event in enumerate(events):
            where = f"events[{index}]"
            grammar.event(event_object(event.data, event.event, where), where, index)
        body = grammar.body(len(events))
    except Reject as rejection:
        return Reassembly(grammar.partial_body(), rejection.reason, len(events), size, grammar.not_carried)
    return Reassembly(body, None, len(events), size, grammar.not_carried)


def event_object(data: str, name: str | None, where: str) -> dict[str, Any]:
    """An event's data as a JSON object with a string ``type`` that agrees with the ``event:`` name."""
    value = require_object(parse_json(data, f"{where} data"), f"{where} data")
    event_type = require_string(value, "type", where)
    if name is not None and name != event_type:
        raise Reject(f"{where} is named {short(name)} but its data says type {short(event_type)}")
    return value


# -- wording --------------------------------------------------------------------

Shown = Literal["both", "strings", "integers"]
"""Which values a reason shows as themselves; the others are shown by their kind."""


def describe(value: Any, shown: Shown = "both") -> str:
    if value is MISSING:
        return "missing"
    if type(value) is str and shown != "integers":
        return "an empty string" if not value else short(value)
    if type(value) is int and shown != "strings":
        return short(value)
    return kind(value)


_KINDS: Final[dict[type, str]] = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    msgspec.Raw: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
}


def kind(value: Any) -> str:
    return _KINDS.get(type(value)) or type(value).__name__


def short(value: Any) -> str:
    """The value's JSON, cut at 60 characters (its repr when it has no JSON form)."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError, UnicodeDecodeError, msgspec.EncodeError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def error_text(error: Any, kind_key: str = "code") -> str:
    """``overloaded_error: Overloaded`` from an error object; its JSON, shortened, from anything else."""
    if type(error) is dict and type(error.get("message")) is str:
        label = error.get(kind_key)
        prefix = f"{label}: " if type(label) in (str, int) else ""
        text = " ".join((prefix + error["message"]).split())
        return text if len(text) <= 120 else text[:117] + "..."
    return short(error)
