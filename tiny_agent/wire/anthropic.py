"""Anthropic Messages: requests from the canonical transcript, responses into it.

**Requests.** ``system`` is top-level; the conversation is turns that
alternate strictly, starting with ``user``.  An assistant message becomes one
turn of ``text`` and ``tool_use`` blocks; a tool message becomes a
``tool_result`` block in a user turn; consecutive messages of the same role
(the results of one batch of calls, a failed run's prompt followed by the
next one, a compaction summary followed by a prompt) merge into one turn of
several blocks, in transcript order, which also puts tool results before any
text in their turn, as the API requires.  ``max_tokens`` is always sent.

**Responses** (a whole body, or a stream reassembled into one) go through the
same seam as Chat Completions: reject first, rebuild from a whitelist, and
return :class:`~tiny_agent.wire.chat.seam.Accepted` or
:class:`~tiny_agent.wire.chat.seam.Rejected` with an
:class:`~tiny_agent.wire.chat.seam.AnthropicUsageDerivation`.

Pure: no I/O.  The seam never raises for any input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, UnsetType

from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation
from tiny_agent.journal.tools import ToolSpec
from tiny_agent.journal.transcript import (
    SYNTHETIC_TEXTS,
    AssistantMessage,
    FunctionCall,
    Message,
    StopReason,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tiny_agent.wire.chat.seam import DROPPED, Accepted, AnthropicUsageDerivation, Outcome, Rejected, unkept_paths
from tiny_agent.wire.request import RequestOptions, WireRequest
from tiny_agent.wire.seam import (
    NormalizedStream,
    Reassembly,
    Reject,
    assistant_message,
    compact_json,
    counter,
    decode_body,
    describe,
    event_object,
    parse_json,
    require_array,
    require_object,
    require_text,
    stream_text,
    text_member,
    usage_object,
)
from tiny_agent.wire.sse import parse_events
from tiny_agent.wire.wording import MISSING, error_text, short

PATH: Final = "/messages"
API_VERSION: Final = "2023-06-01"
DEFAULT_MAX_TOKENS: Final = 4096
"""Sent when the caller sets no cap (the API requires one): every Claude model can generate this many."""

_ERROR_TEXTS: Final = frozenset(SYNTHETIC_TEXTS.values())


# == requests =================================================================


class TextBlock(msgspec.Struct, frozen=True, tag_field="type", tag="text"):
    text: str


class ToolUseBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(msgspec.Struct, frozen=True, tag_field="type", tag="tool_result"):
    tool_use_id: str
    content: str
    is_error: Literal[True] | UnsetType = UNSET


Block = TextBlock | ToolUseBlock | ToolResultBlock


class Turn(msgspec.Struct, frozen=True):
    role: Literal["user", "assistant"]
    content: list[Block]


class AnthropicTool(msgspec.Struct, frozen=True):
    name: str
    description: str
    input_schema: dict[str, Any]


class MessagesBody(msgspec.Struct, frozen=True, kw_only=True):
    """The request body; members encode in this order and unset ones are left out."""

    model: str
    max_tokens: int
    system: str | UnsetType = UNSET
    messages: list[Turn]
    tools: list[AnthropicTool] | UnsetType = UNSET
    stream: Literal[True] | UnsetType = UNSET


def anthropic_request(
    model: str,
    system: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    options: RequestOptions | None = None,
) -> WireRequest:
    """The ``POST /messages`` request for this context.

    ``messages`` is the active context of a valid transcript (every tool
    message answers a call of the assistant message before it).
    """
    chosen = options or RequestOptions()
    body = MessagesBody(
        model=model,
        max_tokens=DEFAULT_MAX_TOKENS if chosen.max_tokens is None else chosen.max_tokens,
        system=system if system else UNSET,
        messages=turns(messages),
        tools=[AnthropicTool(spec.name, spec.description, spec.parameters) for spec in tools] if tools else UNSET,
        stream=True if chosen.stream else UNSET,
    )
    return WireRequest(
        path=PATH, body=msgspec.json.encode(body), headers={"anthropic-version": API_VERSION}, stream=chosen.stream
    )


def turns(messages: Sequence[Message]) -> list[Turn]:
    """The messages as strictly alternating turns: same-role neighbours merge, blockless messages vanish."""
    result: list[Turn] = []
    for message in messages:
        role: Literal["user", "assistant"] = "assistant" if isinstance(message, AssistantMessage) else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if result and result[-1].role == role:
            result[-1].content.extend(blocks)
        else:
            result.append(Turn(role=role, content=blocks))
    return result


def _blocks(message: Message) -> list[Block]:
    if isinstance(message, UserMessage):
        return [TextBlock(message.content)]
    if isinstance(message, ToolMessage):
        # The transcript does not say whether a tool failed; the fixed texts of
        # calls that were never (knowingly) run do, so only those are marked.
        failed: Literal[True] | UnsetType = True if message.content in _ERROR_TEXTS else UNSET
        return [ToolResultBlock(tool_use_id=message.tool_call_id, content=message.content, is_error=failed)]
    # The API refuses text blocks that are empty or only whitespace; such text
    # says nothing, so a turn of tool calls without words has no text block.
    text = message.content or ""
    blocks: list[Block] = [TextBlock(text)] if text.strip() else []
    blocks.extend(ToolUseBlock(call.id, call.function.name, tool_input(call.function.arguments)) for call in message.calls)
    return blocks


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's argument text as the ``input`` object; ``{}`` when the text is not one JSON object.

    Such a call was never run: the loop answered it with the fixed
    invalidArguments text, which follows it in the next turn.  ``input`` must
    be an object, so ``{}`` keeps the request valid without inventing members
    the tool's schema does not declare (which the model might then imitate);
    the tool result tells the model its call failed.
    """
    try:
        value = LineDecoder().decode(arguments.encode("utf-8", "surrogatepass"))
    except ProfileViolation:
        return {}
    return value if type(value) is dict else {}


# == responses ================================================================

_KNOWN_BLOCKS: Final = "text, tool_use, thinking, redacted_thinking"
_KEPT_TEXT: Final = {"type": None, "text": None}
_KEPT_TOOL_USE: Final = {"type": None, "id": None, "name": None, "input": None}
_KEPT_USAGE: Final = {
    "input_tokens": None,
    "output_tokens": None,
    "cache_read_input_tokens": None,
    "cache_creation_input_tokens": None,
}


def normalize_anthropic_body(body: bytes | str) -> Outcome:
    """Parse a whole response body (strict JSON) and normalize it."""
    try:
        value = decode_body(body)
    except Reject as rejection:
        return Rejected(reason=rejection.reason, usage=AnthropicUsageDerivation().usage, derivation=AnthropicUsageDerivation())
    return normalize_anthropic(value)


def normalize_anthropic(body: Any) -> Outcome:
    """Normalize the decoded body of one Messages response."""
    derivation, usage_problem = read_usage(body)
    metadata = _metadata(body)
    try:
        content = _message_content(body)
        stop_reason = _known_stop_reason(body.get("stop_reason", MISSING))
        message = _rebuild(content)
        final_stop = _agreeing_stop_reason(stop_reason, message)
    except Reject as rejection:
        return Rejected(reason=rejection.reason, usage=derivation.usage, derivation=derivation, **metadata)
    if usage_problem is not None:
        return Rejected(reason=usage_problem, usage=derivation.usage, derivation=derivation, **metadata)
    return Accepted(
        message=message,
        stop_reason=final_stop,
        usage=derivation.usage,
        derivation=derivation,
        dropped=dropped_paths(body),
        **metadata,
    )


def _metadata(body: Any) -> dict[str, Any]:
    if type(body) is not dict:
        return {}
    stop = body.get("stop_reason")
    return {
        "finish_reason": stop if type(stop) is str else None,
        "response_id": text_member(body, "id"),
        "model": text_member(body, "model"),
    }


def _message_content(body: Any) -> list[Any]:
    """The content blocks of an assistant message body (an error body is rejected with its message)."""
    if type(body) is not dict:
        raise Reject(f"response is {describe(body)}, not an object")
    body_type = body.get("type", MISSING)
    if body_type == "error":
        raise Reject(f"provider reported an error: {error_text(body.get('error'), 'type')}")
    if body_type != "message":
        raise Reject(f'type is {describe(body_type)} (expected "message")')
    role = body.get("role", MISSING)
    if role != "assistant":
        raise Reject(f'role is {describe(role)} (expected "assistant")')
    return require_array(body.get("content", MISSING), "content")


_STOP_REASONS: Final[dict[str, StopReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
}


def _known_stop_reason(value: Any) -> StopReason:
    """The stop reason before looking at the content: refusals and paused turns are not answers."""
    if type(value) is str and value in _STOP_REASONS:
        return _STOP_REASONS[value]
    if value == "refusal":
        raise Reject("stop_reason refusal: the model declined to answer")
    if value == "pause_turn":
        raise Reject("stop_reason pause_turn: the server paused a long-running turn, which tiny-agent does not continue")
    if value is None or value is MISSING:
        raise Reject(f"stop_reason is {describe(value)} (the response does not say why it ended)")
    if type(value) is not str:
        raise Reject(f"stop_reason is {describe(value)} (expected a string)")
    raise Reject(f"stop_reason {short(value)} is not one the seam knows (end_turn, stop_sequence, tool_use, max_tokens)")


def _agreeing_stop_reason(stop_reason: StopReason, message: AssistantMessage) -> StopReason:
    has_calls = message.tool_calls is not UNSET
    if stop_reason == "toolUse" and not has_calls:
        raise Reject("stop_reason tool_use but the message carries no tool_use blocks")
    if stop_reason == "stop" and has_calls:
        return "toolUse"
    return stop_reason


def _rebuild(content: list[Any]) -> AssistantMessage:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for index, value in enumerate(content):
        where = f"content[{index}]"
        block = require_object(value, where)
        block_type = block.get("type", MISSING)
        if block_type == "text":
            texts.append(_text(block, where))
        elif block_type == "tool_use":
            calls.append(_tool_call(block, where))
        elif block_type in ("thinking", "redacted_thinking"):
            continue
        else:
            raise Reject(f"{where}.type is {describe(block_type)}, not a block the seam knows ({_KNOWN_BLOCKS})")
    return assistant_message(texts, calls, "content")


def _text(block: dict[str, Any], where: str) -> str:
    text = block.get("text", MISSING)
    if type(text) is not str:
        raise Reject(f"{where}.text is {describe(text)} (expected a string)")
    return text


def _tool_call(block: dict[str, Any], where: str) -> ToolCall:
    call_id = require_text(block, "id", where)
    name = require_text(block, "name", where)
    arguments = compact_json(require_object(block.get("input", MISSING), f"{where}.input"), f"{where}.input")
    return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))


def read_usage(body: Any) -> tuple[AnthropicUsageDerivation, str | None]:
    """The derivation (unreadable counters count as 0) and the first problem found, if any."""
    problems: list[str] = []
    usage = usage_object(body, "usage", problems)
    derivation = AnthropicUsageDerivation(
        input_tokens=counter(usage, "input_tokens", "usage.input_tokens", problems),
        output_tokens=counter(usage, "output_tokens", "usage.output_tokens", problems),
        cache_read_input_tokens=counter(usage, "cache_read_input_tokens", "usage.cache_read_input_tokens", problems),
        cache_creation_input_tokens=counter(usage, "cache_creation_input_tokens", "usage.cache_creation_input_tokens", problems),
    )
    return derivation, problems[0] if problems else None


def dropped_paths(body: dict[str, Any]) -> list[str]:
    """The paths of every member of an accepted body the canonical result was not built from."""
    blocks = [_kept_block(block) for block in body["content"]]
    shape = {"type": None, "role": None, "content": blocks, "stop_reason": None, "usage": _KEPT_USAGE}
    return unkept_paths(body, shape)


def _kept_block(block: dict[str, Any]) -> Any:
    if block["type"] == "text":
        return _KEPT_TEXT
    if block["type"] == "tool_use":
        return _KEPT_TOOL_USE
    return DROPPED


# == streams ==================================================================

BlockKind = Literal["text", "tool_use", "thinking", "other"]

_CARRIED_DELTAS: Final[dict[str, BlockKind]] = {"text_delta": "text", "input_json_delta": "tool_use"}
"""Deltas the body is built from, and the only block kind each may extend."""
_UNCARRIED_DELTAS: Final[dict[str, BlockKind]] = {
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "citations_delta": "text",
}
"""Deltas the seam would drop anyway: not carried into the body (listed instead), on their own block kind only."""


class _OpenBlock:
    """One content block being reassembled: its start, and its text or JSON pieces (joined once, at the stop)."""

    __slots__ = ("start", "where", "kind", "pieces", "open")

    def __init__(self, start: dict[str, Any], where: str) -> None:
        self.start = start
        self.where = where
        """The path of the start's ``content_block``, for reasons."""
        block_type = start.get("type")
        self.kind: BlockKind = "other"
        if block_type == "text" or block_type == "tool_use":
            self.kind = block_type
        elif block_type == "thinking" or block_type == "redacted_thinking":
            self.kind = "thinking"
        self.pieces: list[str] = []
        self.open = True

    def finished(self) -> dict[str, Any]:
        block = dict(self.start)
        if self.kind == "text":
            block["text"] = _text(self.start, self.where) + "".join(self.pieces)
        elif self.kind == "tool_use":
            joined = "".join(self.pieces)
            # No input JSON at all (no delta, or only empty pieces, as for a call
            # without arguments) leaves the start's input, which is then {}.
            if joined:
                block["input"] = parse_json(joined, f"the input_json_delta pieces of {self.where}")
        return block


class _Reassembler:
    """The Messages event grammar, one event at a time; the first broken rule raises Reject."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: list[_OpenBlock] = []
        self.stopped = False
        self.not_carried: list[str] = []
        self.events = 0

    def event(self, value: dict[str, Any], where: str) -> None:
        self.events += 1
        event_type = value["type"]
        if event_type == "ping":
            return
        if event_type == "error":
            raise Reject(f"{where}: stream reported an error: {error_text(value.get('error'), 'type')}")
        if self.stopped:
            raise Reject(f"{where} ({event_type}) comes after message_stop")
        if event_type == "message_start":
            self._message_start(value, where)
            return
        message = self.message
        if message is None:
            raise Reject(f"{where} ({event_type}) comes before message_start")
        if event_type == "content_block_start":
            self._block_start(value, where)
        elif event_type == "content_block_delta":
            self._block_delta(value, where)
        elif event_type == "content_block_stop":
            self._open_block(value, where).open = False
            self._carried(value, {"type": None, "index": None}, where)
        elif event_type == "message_delta":
            self._message_delta(message, value, where)
        elif event_type == "message_stop":
            self._message_stop(where)
            self._carried(value, {"type": None}, where)
        else:
            # Anthropic documents that it may add event types: one the seam does
            # not know is not carried (and listed), rather than failing a paid answer.
            self.not_carried.append(where)

    def _carried(self, value: dict[str, Any], kept: dict[str, Any], where: str) -> None:
        self.not_carried.extend(unkept_paths(value, kept, where))

    def _message_start(self, value: dict[str, Any], where: str) -> None:
        if self.message is not None:
            raise Reject(f"{where}: a second message_start")
        message = dict(require_object(value.get("message", MISSING), f"{where}.message"))
        content = message.get("content", MISSING)
        if type(content) is not list or content:
            raise Reject(f"{where}.message.content is {describe(content)} (expected an empty array)")
        self.message = message
        self._carried(value, {"type": None, "message": None}, where)

    def _block_start(self, value: dict[str, Any], where: str) -> None:
        index = value.get("index", MISSING)
        if type(index) is not int or index != len(self.blocks):
            raise Reject(f"{where}.index is {describe(index)} (expected {len(self.blocks)}, the next block)")
        block = require_object(value.get("content_block", MISSING), f"{where}.content_block")
        self.blocks.append(_OpenBlock(block, f"{where}.content_block"))
        self._carried(value, {"type": None, "index": None, "content_block": None}, where)

    def _block_delta(self, value: dict[str, Any], where: str) -> None:
        block = self._open_block(value, where)
        delta = require_object(value.get("delta", MISSING), f"{where}.delta")
        if block.kind == "other":
            # The seam rejects a block it does not know; its deltas need no reading.
            self._carried(value, {"type": None, "index": None, "delta": DROPPED}, where)
            return
        delta_type = delta.get("type", MISSING)
        if type(delta_type) is not str or (delta_type not in _CARRIED_DELTAS and delta_type not in _UNCARRIED_DELTAS):
            raise Reject(f"{where}.delta.type is {describe(delta_type)}, not a delta the seam knows")
        belongs = _CARRIED_DELTAS.get(delta_type) or _UNCARRIED_DELTAS[delta_type]
        if belongs != block.kind:
            raise Reject(
                f"{where}: {delta_type} for content block {value['index']}, which is a {short(block.start.get('type'))} block"
            )
        if delta_type not in _CARRIED_DELTAS:
            self._carried(value, {"type": None, "index": None, "delta": DROPPED}, where)
            return
        member = "text" if delta_type == "text_delta" else "partial_json"
        piece = delta.get(member, MISSING)
        if type(piece) is not str:
            raise Reject(f"{where}.delta.{member} is {describe(piece)} (expected a string)")
        block.pieces.append(piece)
        self._carried(value, {"type": None, "index": None, "delta": {"type": None, member: None}}, where)

    def _open_block(self, value: dict[str, Any], where: str) -> _OpenBlock:
        index = value.get("index", MISSING)
        if type(index) is not int or not 0 <= index < len(self.blocks) or not self.blocks[index].open:
            raise Reject(f"{where}.index is {describe(index)}, which names no open content block")
        return self.blocks[index]

    def _message_delta(self, message: dict[str, Any], value: dict[str, Any], where: str) -> None:
        delta = require_object(value.get("delta", MISSING), f"{where}.delta")
        for key in ("stop_reason", "stop_sequence"):
            if key in delta:
                message[key] = delta[key]
        usage = value.get("usage")
        if usage is not None:
            message["usage"] = _merged_usage(message.get("usage"), require_object(usage, f"{where}.usage"))
        self._carried(value, {"type": None, "delta": {"stop_reason": None, "stop_sequence": None}, "usage": None}, where)

    def _message_stop(self, where: str) -> None:
        for index, block in enumerate(self.blocks):
            if block.open:
                raise Reject(f"{where}: message_stop while content block {index} is still open")
        self.stopped = True

    def body(self) -> dict[str, Any]:
        """The message with its reassembled content (once message_stop has closed the stream)."""
        if self.message is None or not self.stopped:
            raise Reject(f"stream ended without message_stop (after {self.events} complete events)")
        body = dict(self.message)
        body["content"] = [block.finished() for block in self.blocks]
        return body

    def partial_body(self) -> dict[str, Any] | None:
        """After a problem: the message as far as it arrived, whose usage is still paid for."""
        return None if self.message is None else dict(self.message)


def _merged_usage(start: Any, delta: dict[str, Any]) -> dict[str, Any]:
    """message_delta's counters are cumulative: each it sends replaces message_start's (a null replaces nothing)."""
    merged = dict(start) if type(start) is dict else {}
    for key, count in delta.items():
        if count is not None:
            merged[key] = count
    return merged


def reassemble_anthropic_stream(stream: bytes | str) -> Reassembly:
    """A Messages event stream as the one body the API would have sent whole."""
    text = stream_text(stream)
    if isinstance(text, str):
        return Reassembly(body=None, problem=text, event_count=0, byte_size=len(stream), not_carried=[])
    source, size = text
    events = parse_events(source)
    reassembler = _Reassembler()
    try:
        for index, event in enumerate(events):
            where = f"events[{index}]"
            reassembler.event(event_object(event.data, event.event, where), where)
        body = reassembler.body()
    except Reject as rejection:
        return Reassembly(
            body=reassembler.partial_body(),
            problem=rejection.reason,
            event_count=len(events),
            byte_size=size,
            not_carried=reassembler.not_carried,
        )
    return Reassembly(body=body, problem=None, event_count=len(events), byte_size=size, not_carried=reassembler.not_carried)


def normalize_anthropic_stream(stream: bytes | str) -> NormalizedStream:
    """Reassemble a Messages event stream and normalize the body; a rejected stream keeps the usage that arrived."""
    reassembly = reassemble_anthropic_stream(stream)
    if reassembly.problem is None:
        return NormalizedStream(outcome=normalize_anthropic(reassembly.body), reassembly=reassembly)
    derivation, _ = read_usage(reassembly.body)
    rejected = Rejected(reason=reassembly.problem, usage=derivation.usage, derivation=derivation, **_metadata(reassembly.body))
    return NormalizedStream(outcome=rejected, reassembly=reassembly)
