"""Chat Completions streams reassembled into the one body a non-streamed request would have returned,
and :class:`LiveChatView`, the same reassembly seen live (the rules: docs/normalize.md, "Streams").

Pure: no I/O.  Never raises for any input.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from tiny_agent.journal.json_profile import LineDecoder, ProfileViolation
from tiny_agent.wire.seam import MISSING, Reassembly, Reject, describe, error_text, kind, short, text_member
from tiny_agent.wire.sse import DONE, SseEvent, parse_events, stream_events

_KEEP_FIRST: Final = frozenset(("index", "type"))
"""Delta members that are identifiers, not text: they keep their first value."""

_Where = tuple[str | int, ...]
"""Where a member sits inside one chunk: ``("choices", 0, "delta", "tool_calls", 1)``."""


class Reassembled(msgspec.Struct, frozen=True):
    body: dict[str, Any]
    chunks: int
    """Data events before ``[DONE]`` (or before the end of the body)."""
    bytes: int
    dropped: list[str]
    """Paths (``chunks[*].…``) of the chunk members reassembly did not carry into the body, first seen first."""
    done: bool


class StreamRejected(msgspec.Struct, frozen=True):
    reason: str
    chunks: int
    """Data events read, up to and including the one rejected."""
    bytes: int
    usage: Any | None = None
    """The last ``usage`` that arrived (the rejected chunk's included): the tokens were paid for."""


StreamOutcome = Reassembled | StreamRejected


def reassemble(text: str) -> StreamOutcome:
    size = len(text.encode("utf-8", "surrogatepass"))
    return reassemble_events(parse_events(text), size)


def reassemble_events(events: Iterable[SseEvent], size: int) -> StreamOutcome:
    assembler = _Assembler()
    for event in events:
        assembler.push(event)
        if assembler.stopped:
            break
    return assembler.outcome(size)


def reassembly(stream: bytes | str) -> Reassembly:
    """The stream as every API's :class:`Reassembly` (a rejection keeps only the usage that arrived)."""
    framed = stream_events(stream)
    if isinstance(framed, str):
        return Reassembly(body=None, problem=framed, event_count=0, byte_size=len(stream), not_carried=[])
    outcome = reassemble_events(*framed)
    if isinstance(outcome, StreamRejected):
        paid = None if outcome.usage is None else {"usage": outcome.usage}
        return Reassembly(body=paid, problem=outcome.reason, event_count=outcome.chunks, byte_size=outcome.bytes, not_carried=[])
    return Reassembly(outcome.body, None, event_count=outcome.chunks, byte_size=outcome.bytes, not_carried=outcome.dropped)


# -- the live view --------------------------------------------------------------


class ShownText(msgspec.Struct, frozen=True, tag="text"):
    text: str


class ShownToolCall(msgspec.Struct, frozen=True, tag="toolCall"):
    index: int
    id: str | None
    name: str | None
    arguments: str
    revised: bool = False


Shown = ShownText | ShownToolCall


class LiveChatView:
    """What a terminal shows while a stream arrives (docs/normalize.md, "The live view")."""

    def __init__(self) -> None:
        self._assembler = _Assembler()
        self._seen: set[int] = set()
        self._pending: list[int] = []
        """Calls seen and not yet announced (at most one: a new index announces the one before)."""
        self._revised: set[int] = set()

    def push(self, event: SseEvent) -> list[Shown]:
        assembler = self._assembler
        if assembler.stopped:
            return []
        chunk = assembler.push(event)
        if assembler.done:
            return self._announce_at_end()
        if chunk is None:
            return []
        shown: list[Shown] = []
        for choice in chunk.get("choices") or ():
            if choice["index"] != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if type(text) is str and text:
                shown.append(ShownText(text=text))
            for call in delta.get("tool_calls") or ():
                self._saw_call(call["index"], shown)
            if choice.get("finish_reason") is not None:
                shown.extend(self._announce_at_end())
        return shown

    def _saw_call(self, index: int, shown: list[Shown]) -> None:
        if index in self._seen:
            if index not in self._pending:
                self._revised.add(index)
            return
        shown.extend(self._announce_pending())
        self._seen.add(index)
        self._pending.append(index)

    def _announce_pending(self) -> list[Shown]:
        shown: list[Shown] = [self._call(index, revised=False) for index in self._pending]
        self._pending = []
        return shown

    def _announce_at_end(self) -> list[Shown]:
        """The call still pending, then every call that changed after it was announced (only the end is sure)."""
        shown = self._announce_pending()
        shown.extend(self._call(index, revised=True) for index in sorted(self._revised))
        self._revised = set()
        return shown

    def _call(self, index: int, revised: bool) -> ShownToolCall:
        call = self._assembler.call_so_far(index)
        function = call["function"] if type(call.get("function")) is dict else {}
        return ShownToolCall(
            index=index,
            id=text_member(call, "id"),
            name=text_member(function, "name"),
            arguments=_as_text(function.get("arguments")),
            revised=revised,
        )


# -- accumulation -----------------------------------------------------------------


class _Pieces(list[str]):
    """A string member's pieces, joined once at the end (never quadratic)."""


class _Members(dict[str, Any]):
    """An object inside a tool call, merged member by member."""


class _Calls(dict[int, _Members]):
    pass


class _Choice:
    __slots__ = ("message", "finish_reason")

    def __init__(self) -> None:
        self.message: dict[str, Any] = {}
        """Delta members in first-arrival order: strings as _Pieces, ``tool_calls`` as _Calls."""
        self.finish_reason: Any = None


class _Assembler:
    """The incremental state of one reassembly: push events, then ask for the outcome."""

    def __init__(self) -> None:
        self._decode = LineDecoder().decode
        self.events = 0
        self.chunks = 0
        self.done = False
        self.rejection: str | None = None
        self._id: Any = None
        self._model: Any = None
        self._usage: Any = None
        self._choices: dict[int, _Choice] = {}
        self._dropped: dict[str, None] = {}
        self._chunk_extras: set[str] = set()
        self._choice_extras: set[str] = set()
        """Members already listed as dropped, so a chunk does not build their paths again."""

    @property
    def stopped(self) -> bool:
        return self.done or self.rejection is not None

    def push(self, event: SseEvent) -> dict[str, Any] | None:
        """Take one event; return its chunk if it was merged (None for [DONE], a rejection, or after the end)."""
        if self.stopped:
            return None
        self.events += 1
        if event.data == DONE:
            self.done = True
            return None
        self.chunks += 1
        try:
            return self._merge_chunk(self._decode(event.data.encode("utf-8", "surrogatepass")))
        except ProfileViolation as error:
            reason = f"data is not JSON: {error}"
        except Reject as rejection:
            reason = rejection.reason
        except RecursionError:
            reason = "chunk nested too deeply to merge"
        self.rejection = f"event {self.events}: {reason}"
        return None

    def outcome(self, size: int) -> StreamOutcome:
        if self.rejection is not None:
            return self._rejected(self.rejection, size)
        first = self._choices.get(0)
        if first is None or first.finish_reason is None:
            return self._rejected(self._unfinished(), size)
        try:
            choices = [_finished_choice(index, self._choices[index]) for index in sorted(self._choices)]
        except RecursionError:
            return self._rejected("the reassembled message is nested too deeply", size)
        body = {"id": self._id, "object": "chat.completion", "model": self._model, "choices": choices, "usage": self._usage}
        return Reassembled(body=body, chunks=self.chunks, bytes=size, dropped=list(self._dropped), done=self.done)

    def _rejected(self, reason: str, size: int) -> StreamRejected:
        return StreamRejected(reason=reason, chunks=self.chunks, bytes=size, usage=self._usage)

    def call_so_far(self, index: int) -> dict[str, Any]:
        choice = self._choices.get(0)
        calls = choice.message.get("tool_calls") if choice is not None else None
        if type(calls) is not _Calls or index not in calls:
            return {}
        return _finished_members(calls[index])

    def _unfinished(self) -> str:
        rule = "without a finish_reason for choice 0"
        if self.done:
            return f"event {self.events}: [DONE] arrived {rule}"
        if self.events == 0:
            return f"the stream has no events ({rule})"
        return f"the stream ended after event {self.events} {rule}"

    # -- one chunk ----------------------------------------------------------------

    def _merge_chunk(self, chunk: Any) -> dict[str, Any]:
        if type(chunk) is not dict:
            raise Reject(f"chunk is {kind(chunk)} (expected an object)")
        error = chunk.get("error")
        if error is not None:
            # An error chunk's usage was paid for too.
            self._usage = self._last(self._usage, chunk.get("usage"), "chunks[*].usage")
            raise Reject(f"provider reported an error: {error_text(error)}")
        for key, value in chunk.items():
            if key == "choices":
                self._merge_choices(value)
            elif key == "usage":
                self._usage = self._last(self._usage, value, "chunks[*].usage")
            elif key == "id":
                self._id = self._first(self._id, value, key)
            elif key == "model":
                self._model = self._first(self._model, value, key)
            elif key not in self._chunk_extras:
                self._chunk_extras.add(key)
                self._dropped[f"chunks[*].{key}"] = None
        return chunk

    def _first(self, current: Any, value: Any, key: str) -> Any:
        if current is None:
            return value
        if value is not None and value != current:
            self._dropped[f"chunks[*].{key}"] = None
        return current

    def _last(self, current: Any, value: Any, path: str) -> Any:
        """The last non-null value wins; a different earlier one is listed as dropped."""
        if value is None:
            return current
        if current is not None and value != current:
            self._dropped[path] = None
        return value

    def _merge_choices(self, choices: Any) -> None:
        if choices is None:
            return
        if type(choices) is not list:
            raise Reject(f"choices is {kind(choices)} (expected an array)")
        for position, choice in enumerate(choices):
            if type(choice) is not dict:
                raise Reject(f"choices[{position}] is {kind(choice)} (expected an object)")
            index = choice.get("index", MISSING)
            if type(index) is not int or index < 0:
                raise Reject(f"choices[{position}].index is {describe(index, 'integers')} (expected a non-negative integer)")
            state = self._choices.get(index)
            if state is None:
                state = self._choices[index] = _Choice()
            for key, value in choice.items():
                if key == "delta":
                    self._merge_delta(state, value, position)
                elif key == "finish_reason":
                    state.finish_reason = self._last(state.finish_reason, value, "chunks[*].choices[*].finish_reason")
                elif key != "index" and key not in self._choice_extras:
                    self._choice_extras.add(key)
                    self._dropped[f"chunks[*].choices[*].{key}"] = None

    def _merge_delta(self, state: _Choice, delta: Any, position: int) -> None:
        if delta is None:
            return
        if type(delta) is not dict:
            raise Reject(f"choices[{position}].delta is {kind(delta)} (expected an object)")
        message = state.message
        for key, value in delta.items():
            current = message.get(key)
            if type(current) is _Pieces and type(value) is str:
                # The common case, a text piece, without the general merge's checks.
                current.append(value)
            elif key == "tool_calls":
                self._merge_calls(message, value, ("choices", position, "delta"))
            elif key == "role":
                _merge_role(message, value, ("choices", position, "delta"))
            else:
                _merge_member(message, key, value, ("choices", position, "delta"), False, self._dropped)

    def _merge_calls(self, message: dict[str, Any], calls: Any, where: _Where) -> None:
        if calls is None:
            return
        if type(calls) is not list:
            raise Reject(f"{_concrete(where, 'tool_calls')} is {kind(calls)} (expected an array)")
        if not calls:
            # An empty array says "no call pieces in this chunk" (vLLM sends one with text).
            return
        merged = message.get("tool_calls")
        if merged is None:
            merged = message["tool_calls"] = _Calls()
        call_where = (*where, "tool_calls")
        for position, call in enumerate(calls):
            here = (*call_where, position)
            if type(call) is not dict:
                raise Reject(f"{_concrete(call_where, position)} is {kind(call)} (expected an object)")
            index = call.get("index", MISSING)
            if type(index) is not int or index < 0:
                raise Reject(f"{_concrete(here, 'index')} is {describe(index, 'integers')} (expected a non-negative integer)")
            members = merged.get(index)
            if members is None:
                members = merged[index] = _Members()
            for key, value in call.items():
                _merge_member(members, key, value, here, True, self._dropped)


def _merge_role(message: dict[str, Any], role: Any, where: _Where) -> None:
    current = message.get("role")
    if current is None:
        message["role"] = role
        return
    if role is not None and role != current:
        raise Reject(f"{_concrete(where, 'role')} is {short(role)} after {short(current)} (a message has one role)")


def _merge_member(members: dict[str, Any], key: str, value: Any, where: _Where, deep: bool, dropped: dict[str, None]) -> None:
    """Merge one delta member; ``deep``: inside a tool call, where objects merge member by member."""
    current = members.get(key)
    if deep and type(value) is str and (current is None or type(current) is str) and _names_the_call(where, key):
        # One value, however often it is repeated (llama-cpp-python repeats it in every fragment).
        if not current:
            members[key] = value
        elif value and value != current:
            raise Reject(f"{_concrete(where, key)} is {short(value)} after {short(current)} (a tool call has one {key})")
        return
    if current is None:
        # Absent, or null so far: this value starts the member (a null keeps its place).
        members[key] = _started(key, value, where, deep, dropped)
        return
    if value is None:
        return
    if key in _KEEP_FIRST:
        if value != current:
            dropped[_star(where, key)] = None
        return
    if type(current) is _Pieces:
        if type(value) is not str:
            raise Reject(f"{_concrete(where, key)} is {kind(value)} after a string (the pieces cannot be joined)")
        current.append(value)
        return
    if type(value) is str:
        raise Reject(f"{_concrete(where, key)} is a string after {kind(_finished(current))} (the pieces cannot be joined)")
    if type(current) is _Members:
        if type(value) is not dict:
            raise Reject(f"{_concrete(where, key)} is {kind(value)} after an object (the pieces cannot be merged)")
        inner = (*where, key)
        for name, member in value.items():
            _merge_member(current, name, member, inner, deep, dropped)
        return
    if value != current:
        dropped[_star(where, key)] = None


def _names_the_call(where: _Where, key: str) -> bool:
    """A call's ``id`` and ``type`` and its ``function.name``: the first non-empty value is the one."""
    if key == "name":
        return where[-1] == "function" and type(where[-2]) is int
    return key in ("id", "type") and type(where[-1]) is int and where[-2] == "tool_calls"


def _started(key: str, value: Any, where: _Where, deep: bool, dropped: dict[str, None]) -> Any:
    if key in _KEEP_FIRST:
        return value
    if type(value) is str:
        return _Pieces((value,))
    if deep and type(value) is dict:
        members = _Members()
        inner = (*where, key)
        for name, member in value.items():
            _merge_member(members, name, member, inner, deep, dropped)
        return members
    return value


def _finished_choice(index: int, choice: _Choice) -> dict[str, Any]:
    accumulated = choice.message
    message = {"role": accumulated["role"]} if "role" in accumulated else {}
    message["content"] = _finished(accumulated.get("content"))
    message.update((key, _finished(value)) for key, value in accumulated.items() if key not in ("role", "content"))
    return {"index": index, "message": message, "finish_reason": choice.finish_reason}


def _finished(value: Any) -> Any:
    kind = type(value)
    if kind is _Pieces:
        return "".join(value)
    if kind is _Members:
        return _finished_members(value)
    if kind is _Calls:
        return [_finished(value[index]) for index in sorted(value)]
    return value


def _finished_members(members: _Members) -> dict[str, Any]:
    return {key: _finished(member) for key, member in members.items()}


# -- paths and wording ---------------------------------------------------------------


def _concrete(where: _Where, key: str | int) -> str:
    """``choices[0].delta.tool_calls[1].function`` — a path inside the chunk that was rejected."""
    text = ""
    for part in (*where, key):
        if type(part) is int:
            text += f"[{part}]"
        else:
            text = f"{text}.{part}" if text else str(part)
    return text


def _star(where: _Where, key: str) -> str:
    """``chunks[*].choices[*].delta.audio`` — a dropped path, the same for every chunk and position."""
    text = "chunks[*]"
    for part in (*where, key):
        text += "[*]" if type(part) is int else f".{part}"
    return text


def _as_text(value: Any) -> str:
    if value is None or type(value) is str:
        return value or ""
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, msgspec.EncodeError, OverflowError, UnicodeDecodeError):
        return repr(value)
