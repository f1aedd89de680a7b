"""Anthropic Messages: requests from the canonical transcript, and the seam back into it (whole and streamed)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_normalize import JSON_VALUES
from wire_apis import WIRE, cases, check_outcome, fixture_record, inputs

from tiny_agent.agent.tools.builtin import BASH, READ, WRITE
from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.journal.transcript import (
    SYNTHETIC_TEXTS,
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    compaction_summary_message,
)
from tiny_agent.wire.anthropic import API as ANTHROPIC
from tiny_agent.wire.anthropic.request import API_VERSION, DEFAULT_MAX_TOKENS, anthropic_request, tool_input
from tiny_agent.wire.anthropic.seam import AnthropicUsageDerivation
from tiny_agent.wire.request import RequestOptions
from tiny_agent.wire.seam import Accepted, NotReported, Rejected

normalize_anthropic = ANTHROPIC.normalize
normalize_anthropic_body = ANTHROPIC.normalize_body
normalize_anthropic_stream = ANTHROPIC.normalize_stream
reassemble_anthropic_stream = ANTHROPIC.reassemble

FIXTURES = WIRE / "anthropic"


# == fixtures =================================================================


@pytest.mark.parametrize("name", cases(FIXTURES))
def test_fixture_gives_its_expected_outcome(name: str) -> None:
    expected = json.loads((FIXTURES / f"{name}.expected.json").read_text())
    assert fixture_record(FIXTURES, name, normalize_anthropic_body, normalize_anthropic_stream) == expected


def test_every_fixture_has_an_expectation() -> None:
    assert inputs(FIXTURES) == set(cases(FIXTURES))
    assert len(cases(FIXTURES)) >= 15


def test_a_stream_and_its_whole_body_agree() -> None:
    streamed = normalize_anthropic_stream((FIXTURES / "stream-tool-use.sse").read_bytes())
    body = streamed.reassembly.body
    assert body is not None
    assert body["content"][1]["input"] == {"path": "docs/journal-ünïcode ✓.md"}
    whole = normalize_anthropic_body(msgspec.json.encode(body))
    assert whole == streamed.outcome


# == the seam: whole bodies ===================================================


def _body(*content: dict[str, Any], stop: Any = "end_turn", **extra: Any) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 5},
        **extra,
    }


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _hosted(block_id: str, name: str = "web_search") -> dict[str, Any]:
    return {"type": "server_tool_use", "id": block_id, "name": name, "input": {"query": "q"}}


def _tool_use(call_id: str, name: str = "read", tool_input: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"path": "a.txt"} if tool_input is None else tool_input}


def _accepted(body: Any) -> Accepted:
    outcome = normalize_anthropic(body)
    assert isinstance(outcome, Accepted), outcome
    check_outcome(outcome)
    return outcome


def _rejected(body: Any) -> str:
    outcome = normalize_anthropic(body)
    assert isinstance(outcome, Rejected), outcome
    check_outcome(outcome)
    return outcome.reason


def test_text_blocks_are_concatenated_in_order_without_separator() -> None:
    outcome = _accepted(_body(_text("Hel"), _text("lo"), _text(" world")))
    assert outcome.message == AssistantMessage(content="Hello world")
    assert outcome.stop_reason == "stop"


def test_content_is_null_with_calls_and_no_text_and_empty_without_either() -> None:
    assert _accepted(_body(_tool_use("t1"), stop="tool_use")).message.content is None
    assert _accepted(_body(_text(""), _tool_use("t1"), stop="tool_use")).message.content is None
    assert _accepted(_body()).message == AssistantMessage(content="")


def test_a_tool_use_becomes_a_call_with_compact_arguments_in_key_order() -> None:
    arguments = {"zeta": 1, "alpha": ["é", "😀", None], "mid": {"b": True, "a": 0.5}}
    outcome = _accepted(_body(_tool_use("toolu_1", "write", arguments), stop="tool_use"))
    (call,) = outcome.message.calls
    assert call == ToolCall(
        id="toolu_1",
        type="function",
        function=FunctionCall(name="write", arguments='{"zeta":1,"alpha":["é","😀",null],"mid":{"b":true,"a":0.5}}'),
    )
    assert outcome.stop_reason == "toolUse"


def test_thinking_blocks_are_dropped_and_listed() -> None:
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "opaque"}
    outcome = _accepted(_body(thinking, _text("Answer."), redacted))
    assert outcome.message == AssistantMessage(content="Answer.")
    assert outcome.dropped == ["id", "model", "content[0]", "content[2]", "stop_sequence"]


def test_dropped_lists_members_of_kept_blocks_too() -> None:
    text = {"type": "text", "text": "x", "citations": []}
    call = {**_tool_use("t1"), "caller": {"type": "direct"}}
    outcome = _accepted(_body(text, call, stop="tool_use"))
    assert "content[0].citations" in outcome.dropped
    assert "content[1].caller" in outcome.dropped


@pytest.mark.parametrize(
    ("stop", "with_calls", "expected"),
    [
        ("end_turn", False, "stop"),
        ("end_turn", True, "toolUse"),
        ("stop_sequence", False, "stop"),
        ("stop_sequence", True, "toolUse"),
        ("tool_use", True, "toolUse"),
        ("max_tokens", False, "length"),
        ("max_tokens", True, "length"),
    ],
)
def test_stop_reasons(stop: str, with_calls: bool, expected: str) -> None:
    content = [_text("x"), _tool_use("t1")] if with_calls else [_text("x")]
    outcome = _accepted(_body(*content, stop=stop))
    assert outcome.stop_reason == expected
    assert outcome.finish_reason == stop


@pytest.mark.parametrize(
    ("stop", "reason"),
    [
        ("tool_use", "stop_reason tool_use but the message carries no tool_use blocks"),
        ("pause_turn", "stop_reason pause_turn: the server paused a long-running turn, which tiny-agent does not continue"),
        (None, "stop_reason is null (the response does not say why it ended)"),
        ("model_context_window_exceeded", 'stop_reason "model_context_window_exceeded" is not one the seam knows'),
        (7, "stop_reason is 7 (expected a string)"),
    ],
)
def test_stop_reasons_that_are_rejected(stop: Any, reason: str) -> None:
    assert _rejected(_body(_text("x"), stop=stop)).startswith(reason)


def test_a_missing_stop_reason_is_rejected() -> None:
    body = _body(_text("x"))
    del body["stop_reason"]
    assert _rejected(body) == "stop_reason is missing (the response does not say why it ended)"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "response is a list, not an object"),
        (
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit",
                },
            },
            "provider reported an error: rate_limit_error: Number of request tokens has exceeded your per-minute rate limit",
        ),
        ({"type": "error", "error": "boom"}, 'provider reported an error: "boom"'),
        ({**_body(), "type": "completion"}, 'type is "completion" (expected "message")'),
        ({**_body(), "role": "user"}, 'role is "user" (expected "assistant")'),
        ({**_body(), "content": "hi"}, 'content is "hi" (expected an array)'),
        (_body("text"), 'content[0] is "text" (expected an object)'),
        (_body({"type": "text", "text": ["a"]}), "content[0].text is a list (expected a string)"),
        (_body({"type": "image", "source": {}}), 'content[0].type is "image", not a block the seam knows'),
        (_body({"text": "x"}), "content[0].type is missing, not a block the seam knows"),
        (_body(_tool_use(""), stop="tool_use"), "content[0].id is an empty string (expected a non-empty string)"),
        (_body({**_tool_use("t1"), "name": None}, stop="tool_use"), "content[0].name is null (expected a non-empty string)"),
        (_body(_tool_use("t1", tool_input=[1]), stop="tool_use"), "content[0].input is a list (expected an object)"),
        (_body(_tool_use("t1", tool_input='{"a":1}'), stop="tool_use"), 'content[0].input is "{\\"a\\":1}" (expected an object)'),
        (_body(_tool_use("t1"), _tool_use("t1"), stop="tool_use"), 'content: tool call id "t1" repeats an earlier call id'),
    ],
)
def test_malformed_bodies_are_rejected_with_a_precise_reason(body: Any, reason: str) -> None:
    assert _rejected(body).startswith(reason)


def test_usage_maps_without_subtracting_the_cache_counters() -> None:
    usage = {"input_tokens": 21, "output_tokens": 393, "cache_read_input_tokens": 1420, "cache_creation_input_tokens": 188086}
    outcome = _accepted(_body(_text("x"), usage=usage))
    assert outcome.usage == Usage(input=21, output=393, cacheRead=1420, cacheWrite=188086)
    assert outcome.derivation == AnthropicUsageDerivation(21, 393, 1420, 188086)
    explained = outcome.derivation.explain()
    assert explained.startswith("input_tokens 21 = input 21 (nothing subtracted")
    assert "apart from input_tokens" in explained
    assert outcome.derivation.cost is None


@pytest.mark.parametrize("usage", [{}, {"input_tokens": None, "cache_read_input_tokens": None}])
def test_absent_or_null_counters_count_as_zero(usage: Any) -> None:
    assert _accepted(_body(_text("x"), usage=usage)).usage == Usage()


def test_no_usage_object_is_not_reported_not_zero() -> None:
    outcome = _accepted(_body(_text("x"), usage=None))
    assert outcome.usage is None
    assert outcome.derivation.explain().startswith("no usage reported: n/a")


def test_a_malformed_counter_rejects_but_the_readable_ones_count() -> None:
    body = _body(_text("x"), usage={"input_tokens": 30, "output_tokens": "7", "cache_read_input_tokens": 4})
    outcome = normalize_anthropic(body)
    assert isinstance(outcome, Rejected)
    assert outcome.reason == 'usage.output_tokens is "7" (expected a non-negative integer)'
    assert outcome.usage == Usage(input=30, output=0, cacheRead=4)


def test_a_rejection_keeps_the_usage_and_metadata() -> None:
    outcome = normalize_anthropic(_body(_text("x"), stop="pause_turn"))
    assert isinstance(outcome, Rejected)
    assert (outcome.usage, outcome.finish_reason, outcome.response_id, outcome.model) == (
        Usage(input=20, output=5),
        "pause_turn",
        "msg_1",
        "claude-x",
    )


def test_a_refusal_is_an_answer_whose_text_is_what_came_before_it() -> None:
    outcome = normalize_anthropic(_body(_text("I can't"), _text(" help."), stop="refusal"))
    assert isinstance(outcome, Accepted)
    assert (outcome.message, outcome.stop_reason) == (AssistantMessage(content="I can't help."), "refusal")
    streamed = normalize_anthropic_stream(_stream(START, *_text_stream("x"), _message_delta("refusal"), STOP)).outcome
    assert isinstance(streamed, Accepted) and streamed.stop_reason == "refusal"
    with_call = normalize_anthropic(_body(_tool_use("t1"), stop="refusal"))
    assert isinstance(with_call, Rejected) and with_call.reason == "content: a refusal that also asks for tool calls"


@pytest.mark.parametrize(
    ("blocks", "reason"),
    [
        ([{"type": "web_search_tool_result", "tool_use_id": "s1", "content": []}], "content[0] is a web_search_tool_result without"),
        ([_hosted("s1", "web_fetch"), {"type": "web_search_tool_result", "tool_use_id": "s1", "content": []}], "content[1] is a web"),
        ([_hosted("s1", "crystal_ball")], 'content[0].name is "crystal_ball", not a server tool the seam knows'),
        ([{**_hosted("s1"), "input": "q"}], "content[0].input is \"q\" (expected an object)"),
        ([{**_hosted("m1"), "type": "mcp_tool_use"}], "content[0].server_name is missing"),
        ([{"type": "crystal_ball_tool_result", "tool_use_id": "s1"}], 'content[0].type is "crystal_ball_tool_result"'),
    ],
)
def test_hosted_blocks_pair_up_and_unknown_ones_are_rejected(blocks: list[dict[str, Any]], reason: str) -> None:
    outcome = normalize_anthropic(_body(*blocks, _text("ok")))
    assert isinstance(outcome, Rejected) and outcome.reason.startswith(reason), outcome


def test_hosted_blocks_are_activity_not_calls() -> None:
    result = {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [{"type": "web_search_result"}] * 2}
    outcome = normalize_anthropic(_body(_hosted("s1"), result, _text("Found.")))
    assert isinstance(outcome, Accepted)
    assert (outcome.message, outcome.stop_reason) == (AssistantMessage(content="Found."), "stop")
    assert outcome.hosted == ['web_search {"query":"q"}', "  → web_search_tool_result: 2 results"]
    assert "content[0]" in outcome.dropped and "content[1]" in outcome.dropped



@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "response body is empty"),
        (b"  \n", "response body is empty"),
        (b"<html>502</html>", "response body is not JSON"),
        (b'{"type":"message","type":"error"}', "response body is not JSON"),
    ],
)
def test_bodies_that_are_not_json(raw: bytes, reason: str) -> None:
    outcome = normalize_anthropic_body(raw)
    assert isinstance(outcome, Rejected)
    assert outcome.reason.startswith(reason)
    assert outcome.usage is None and isinstance(outcome.derivation, NotReported)


# == the seam: streams ========================================================


def _event(data: dict[str, Any], name: str | None = None) -> str:
    label = data.get("type") if name is None else name
    return f"event: {label}\ndata: {json.dumps(data)}\n\n"


def _stream(*events: dict[str, Any]) -> str:
    return "".join(_event(event) for event in events)


START = {
    "type": "message_start",
    "message": {
        "id": "msg_s",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 1, "cache_read_input_tokens": 3},
    },
}
STOP = {"type": "message_stop"}
PING = {"type": "ping"}


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _message_delta(stop: str | None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    if usage is not None:
        event["usage"] = usage
    return event


def _text_stream(*pieces: str) -> list[dict[str, Any]]:
    return [
        _block_start(0, {"type": "text", "text": ""}),
        *(_delta(0, {"type": "text_delta", "text": piece}) for piece in pieces),
        _block_stop(0),
    ]


def _tool_stream(index: int, call_id: str, *pieces: str) -> list[dict[str, Any]]:
    return [
        _block_start(index, {"type": "tool_use", "id": call_id, "name": "read", "input": {}}),
        *(_delta(index, {"type": "input_json_delta", "partial_json": piece}) for piece in pieces),
        _block_stop(index),
    ]


def _streamed(text: str) -> Accepted:
    streamed = normalize_anthropic_stream(text)
    assert isinstance(streamed.outcome, Accepted), streamed.outcome
    check_outcome(streamed.outcome)
    return streamed.outcome


def _stream_rejected(text: str | bytes) -> Rejected:
    streamed = normalize_anthropic_stream(text)
    assert isinstance(streamed.outcome, Rejected), streamed.outcome
    check_outcome(streamed.outcome)
    assert streamed.reassembly.problem in (None, streamed.outcome.reason)
    return streamed.outcome


def test_message_delta_usage_merges_over_message_start() -> None:
    usage = {"output_tokens": 15, "cache_creation_input_tokens": 9, "input_tokens": None}
    outcome = _streamed(_stream(START, *_text_stream("Hi"), _message_delta("end_turn", usage), STOP))
    assert outcome.usage == Usage(input=25, output=15, cacheRead=3, cacheWrite=9)
    assert outcome.message == AssistantMessage(content="Hi")


def test_input_json_pieces_are_joined_then_parsed_strictly() -> None:
    text = _stream(START, *_tool_stream(0, "t1", '{"b": 1, ', '"a": "ü"', "}"), _message_delta("tool_use"), STOP)
    assert _streamed(text).message.calls[0].function.arguments == '{"b":1,"a":"ü"}'
    broken = _stream(START, *_tool_stream(0, "t1", '{"b": 1, ', '"b": 2}'), _message_delta("tool_use"), STOP)
    reason = _stream_rejected(broken).reason
    assert reason.startswith("the input_json_delta pieces of events[1].content_block is not JSON")
    assert "duplicate" in reason


@pytest.mark.parametrize("pieces", [(), ("",), ("", "")])
def test_a_call_without_input_json_keeps_the_start_input(pieces: tuple[str, ...]) -> None:
    text = _stream(START, *_tool_stream(0, "t1", *pieces), _message_delta("tool_use"), STOP)
    assert _streamed(text).message.calls[0].function.arguments == "{}"


def test_input_json_that_is_not_an_object_is_rejected_by_the_seam() -> None:
    text = _stream(START, *_tool_stream(0, "t1", "[1,", "2]"), _message_delta("tool_use"), STOP)
    assert _stream_rejected(text).reason == "content[0].input is a list (expected an object)"


def test_thinking_and_signature_deltas_are_not_carried() -> None:
    thinking = [
        _block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        _delta(0, {"type": "thinking_delta", "thinking": "so"}),
        _delta(0, {"type": "signature_delta", "signature": "sig"}),
        _block_stop(0),
    ]
    text = _stream(
        START,
        *thinking,
        _block_start(1, {"type": "text", "text": ""}),
        _delta(1, {"type": "text_delta", "text": "A"}),
        _block_stop(1),
        _message_delta("end_turn"),
        STOP,
    )
    streamed = normalize_anthropic_stream(text)
    assert streamed.reassembly.not_carried == ["events[2].delta", "events[3].delta"]
    assert streamed.reassembly.body is not None
    assert streamed.reassembly.body["content"][0] == {"type": "thinking", "thinking": "", "signature": ""}
    assert isinstance(streamed.outcome, Accepted)
    assert streamed.outcome.message == AssistantMessage(content="A")
    assert streamed.outcome.dropped == ["id", "model", "content[0]", "stop_sequence"]


def test_pings_unknown_events_and_extra_members() -> None:
    start = {**START, "extra": 1}
    text = _stream(
        PING,
        start,
        PING,
        *_text_stream("x"),
        {"type": "content_block_annotation", "index": 0},
        _message_delta("end_turn"),
        STOP,
        PING,
    )
    streamed = normalize_anthropic_stream(text)
    assert isinstance(streamed.outcome, Accepted)
    assert streamed.reassembly.not_carried == ["events[1].extra", "events[6]"]
    assert streamed.reassembly.event_count == 10
    assert streamed.reassembly.byte_size == len(text.encode())


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        (
            [START, *_text_stream("x"), {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}],
            "events[4]: stream reported an error: overloaded_error: Overloaded",
        ),
        ([START, *_text_stream("x"), _message_delta("end_turn")], "stream ended without message_stop (after 5 complete events)"),
        ([], "stream ended without message_stop (after 0 complete events)"),
        ([*_text_stream("x")], "events[0] (content_block_start) comes before message_start"),
        ([START, START], "events[1]: a second message_start"),
        ([START, _block_start(1, {"type": "text", "text": ""})], "events[1].index is 1 (expected 0, the next block)"),
        (
            [START, *_text_stream("x"), _delta(0, {"type": "text_delta", "text": "y"})],
            "events[4].index is 0, which names no open content block",
        ),
        (
            [START, _block_start(0, {"type": "text", "text": ""}), _delta(0, {"type": "input_json_delta", "partial_json": "{}"})],
            'events[2]: input_json_delta for content block 0, which is a "text" block',
        ),
        (
            [START, _block_start(0, {"type": "text", "text": ""}), _delta(0, {"type": "sparkle_delta"})],
            'events[2].delta.type is "sparkle_delta", not a delta the seam knows',
        ),
        (
            [START, _block_start(0, {"type": "text", "text": ""}), _delta(0, {"type": "text_delta", "text": 5})],
            "events[2].delta.text is 5 (expected a string)",
        ),
        (
            [START, _block_start(0, {"type": "text", "text": ""}), STOP],
            "events[2]: message_stop while content block 0 is still open",
        ),
        (
            [START, *_text_stream("x"), _message_delta("end_turn"), STOP, *_text_stream("y")],
            "events[6] (content_block_start) comes after message_stop",
        ),
        (
            [{**START, "message": {**START["message"], "content": [_text("x")]}}],
            "events[0].message.content is a list (expected an empty array)",
        ),
        (
            [START, {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": 3}],
            "events[1].usage is 3 (expected an object)",
        ),
        ([{"type": 1}], "events[0].type is 1 (expected a string)"),
    ],
)
def test_broken_streams_are_rejected(events: list[dict[str, Any]], reason: str) -> None:
    assert _stream_rejected(_stream(*events)).reason == reason


def test_a_rejected_stream_keeps_the_usage_that_arrived() -> None:
    text = _stream(START, *_text_stream("x"), _message_delta(None, {"output_tokens": 40}))
    outcome = _stream_rejected(text)
    assert outcome.usage == Usage(input=25, output=40, cacheRead=3)
    assert outcome.response_id == "msg_s"


def test_a_stream_whose_body_breaks_a_rule_is_rejected_by_the_seam() -> None:
    outcome = _stream_rejected(_stream(START, *_text_stream("x"), _message_delta("pause_turn"), STOP))
    assert outcome.reason.startswith("stop_reason pause_turn: ")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('event: ping\ndata: {"type": "message_start"}\n\n', 'events[0] is named "ping" but its data says type "message_start"'),
        # [DONE] ends every stream (issue 22): it is not an event of its own.
        ("data: [DONE]\n\n", "stream ended without message_stop (after 0 complete events)"),
        ("data: [1]\n\n", "events[0] data is a list (expected an object)"),
        (b"data: \xff\n\n", "stream is not UTF-8 text (byte 6)"),
    ],
)
def test_events_that_are_not_json_objects(text: str | bytes, reason: str) -> None:
    assert _stream_rejected(text).reason.startswith(reason)


# == requests =================================================================


def _call(call_id: str, arguments: str = '{"path":"a.txt"}', name: str = "read") -> ToolCall:
    return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))


def _request(messages: list[Message], system: str = "Be brief.", **options: Any) -> dict[str, Any]:
    request = anthropic_request("claude-x", system, messages, [READ], RequestOptions(**options))
    body: dict[str, Any] = json.loads(request.body)
    return body


def test_request_envelope_system_on_top_and_max_tokens_always() -> None:
    request = anthropic_request("claude-x", "Be brief.", [UserMessage("hi")], [READ, WRITE])
    assert request.path == "/messages"
    assert request.headers == {"anthropic-version": API_VERSION}
    assert request.stream is False
    body = json.loads(request.body)
    assert list(body) == ["model", "max_tokens", "system", "messages", "tools"]
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert body["system"] == "Be brief."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["tools"][0] == {"name": "read", "description": READ.description, "input_schema": READ.parameters}
    assert all(message["role"] != "system" for message in body["messages"])


def test_request_options() -> None:
    body = _request([UserMessage("hi")], system="", max_tokens=64, stream=True)
    assert list(body) == ["model", "max_tokens", "messages", "tools", "stream"]
    assert (body["max_tokens"], body["stream"]) == (64, True)
    request = anthropic_request("claude-x", "", [UserMessage("hi")], [], RequestOptions(stream=True))
    assert request.stream is True
    assert "tools" not in json.loads(request.body)


def test_tool_results_merge_into_one_user_turn_after_the_calls() -> None:
    messages: list[Message] = [
        UserMessage("Read two files."),
        AssistantMessage(content="Reading.", tool_calls=[_call("t1"), _call("t2", '{"path":"b.txt"}')]),
        ToolMessage(content="A", tool_call_id="t1"),
        ToolMessage(content="B", tool_call_id="t2"),
        AssistantMessage(content="Both read."),
    ]
    assert _request(messages)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Read two files."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "b.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "B"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Both read."}]},
    ]


def test_consecutive_user_messages_merge_in_order() -> None:
    messages: list[Message] = [
        compaction_summary_message("We read the README."),
        UserMessage("First try."),
        UserMessage("Second try, after a failed run."),
    ]
    assert _request(messages)["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[Compacted history]\nWe read the README."},
                {"type": "text", "text": "First try."},
                {"type": "text", "text": "Second try, after a failed run."},
            ],
        }
    ]


def test_results_of_a_failed_run_are_followed_by_the_next_prompt_in_the_same_turn() -> None:
    messages: list[Message] = [
        UserMessage("Go."),
        AssistantMessage(content=None, tool_calls=[_call("t1")]),
        ToolMessage(content=SYNTHETIC_TEXTS["interrupted"], tool_call_id="t1"),
        UserMessage("Try again."),
    ]
    turns = _request(messages)["messages"]
    assert [turn["role"] for turn in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.txt"}}]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": SYNTHETIC_TEXTS["interrupted"], "is_error": True},
        {"type": "text", "text": "Try again."},
    ]


def test_blank_assistant_text_is_not_sent() -> None:
    messages: list[Message] = [
        UserMessage("Go."),
        AssistantMessage(content=" \n", tool_calls=[_call("t1")]),
        ToolMessage("A", "t1"),
    ]
    assert _request(messages)["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.txt"}}
    ]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"path": "a", "b": [1, {"c": null}]}', {"path": "a", "b": [1, {"c": None}]}),
        ('{"z": 1, "a": 2}', {"z": 1, "a": 2}),
        ("{}", {}),
        ('{"path": "a"', {}),
        ("[1, 2]", {}),
        ('"text"', {}),
        ("", {}),
        ('{"a": 1, "a": 2}', {}),
        ('{"a": "\\ud800"}', {}),
    ],
)
def test_tool_input_is_the_arguments_object_or_empty(arguments: str, expected: dict[str, Any]) -> None:
    value = tool_input(arguments)
    assert value == expected
    assert list(value) == list(expected)


def test_invalid_arguments_are_sent_as_an_empty_input_with_the_error_result() -> None:
    messages: list[Message] = [
        UserMessage("Go."),
        AssistantMessage(content=None, tool_calls=[_call("t1", '{"path": ')]),
        ToolMessage(content=SYNTHETIC_TEXTS["invalidArguments"], tool_call_id="t1"),
    ]
    turns = _request(messages)["messages"]
    assert turns[1]["content"][0]["input"] == {}
    assert turns[2]["content"][0]["is_error"] is True


# -- any valid transcript becomes a valid request ------------------------------

TEXT = st.text(min_size=1, max_size=12).filter(lambda text: text.strip() != "")
ARGUMENTS = st.sampled_from(['{"path":"a.txt"}', '{"command":"ls -la","n":2}', "{}", '{"path": ', "[]", '{"x":{"y":[1,2]}}'])


@st.composite
def transcripts(draw: st.DrawFn, blank_text: bool = True) -> list[Message]:
    """Active contexts the reducer accepts: runs of a prompt, tool rounds, and maybe a final answer."""
    ids = itertools.count()
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(compaction_summary_message(draw(TEXT)))
    for _ in range(draw(st.integers(1, 3))):
        messages.append(UserMessage(draw(TEXT)))
        for _ in range(draw(st.integers(0, 3))):
            count = draw(st.integers(1, 3))
            calls = [
                _call(f"call_{next(ids)}", draw(ARGUMENTS), draw(st.sampled_from(["read", "write", "bash"])))
                for _ in range(count)
            ]
            content = draw(st.none() | st.just("") | TEXT) if blank_text else draw(st.none() | TEXT)
            messages.append(AssistantMessage(content=content, tool_calls=calls))
            messages.extend(
                ToolMessage(content=draw(st.sampled_from(["ok", "", *SYNTHETIC_TEXTS.values()])), tool_call_id=call.id)
                for call in calls
            )
        if draw(st.booleans()):
            messages.append(AssistantMessage(content=draw(TEXT)))
    assert transcript_violation(messages) is None
    return messages


def anthropic_violation(turns: list[dict[str, Any]]) -> str | None:
    """The Messages API's conversation rules: strict alternation from user, results right after their calls, results first."""
    if not turns or turns[0]["role"] != "user":
        return "the first turn is not a user turn"
    unanswered: set[str] = set()
    for index, turn in enumerate(turns):
        if index and turn["role"] == turns[index - 1]["role"]:
            return f"turn {index} repeats the role {turn['role']}"
        blocks = turn["content"]
        if not blocks:
            return f"turn {index} is empty"
        if any(block["type"] == "text" and not block["text"].strip() for block in blocks):
            return f"turn {index} has a blank text block"
        kinds = [block["type"] for block in blocks]
        if turn["role"] == "assistant":
            if unanswered:
                return f"turn {index} follows unanswered calls"
            if set(kinds) - {"text", "tool_use"}:
                return f"assistant turn {index} holds {kinds}"
            unanswered = {block["id"] for block in blocks if block["type"] == "tool_use"}
            continue
        results = [block["tool_use_id"] for block in blocks if block["type"] == "tool_result"]
        if kinds[: len(results)] != ["tool_result"] * len(results):
            return f"user turn {index} has text before its tool results"
        if set(results) != unanswered or len(results) != len(unanswered):
            return f"user turn {index} answers {results}, not {sorted(unanswered)}"
        unanswered = set()
    return None


@settings(max_examples=300, deadline=None)
@given(transcripts(), st.booleans())
def test_any_valid_transcript_becomes_a_valid_request(messages: list[Message], stream: bool) -> None:
    request = anthropic_request("claude-x", "sys", messages, [READ, WRITE, BASH], RequestOptions(stream=stream))
    body = json.loads(request.body)
    assert anthropic_violation(body["messages"]) is None
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS
    assert body.get("stream", False) is stream
    assert all(type(block.get("input", {})) is dict for turn in body["messages"] for block in turn["content"])


# == the seam never raises ====================================================


@st.composite
def near_valid_bodies(draw: st.DrawFn) -> dict[str, Any]:
    blocks = draw(
        st.lists(
            st.sampled_from(
                [
                    _text("a"),
                    _text(""),
                    _tool_use("t1"),
                    _tool_use("t2", "write", {"k": "ü"}),
                    {"type": "thinking", "thinking": "x"},
                    {"type": "redacted_thinking", "data": "y"},
                ]
            ),
            max_size=4,
        )
    )
    body = _body(
        *json.loads(json.dumps(blocks)),
        stop=draw(st.sampled_from(["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", None])),
    )
    containers = [body, body["usage"], *body["content"]]
    for _ in range(draw(st.integers(0, 3))):
        container = draw(st.sampled_from(containers))
        key = draw(
            st.sampled_from(
                [
                    "type",
                    "role",
                    "content",
                    "text",
                    "id",
                    "name",
                    "input",
                    "stop_reason",
                    "input_tokens",
                    "cache_read_input_tokens",
                    "usage",
                    "error",
                ]
            )
        )
        container[key] = draw(JSON_VALUES)
    return body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_any_json_value_is_accepted_canonically_or_rejected(value: Any) -> None:
    check_outcome(normalize_anthropic(value))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid_bodies())
def test_near_valid_bodies_are_accepted_canonically_or_rejected(body: dict[str, Any]) -> None:
    check_outcome(normalize_anthropic(body))
    check_outcome(normalize_anthropic_body(json.dumps(body)))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_accepted_canonically_or_rejected(text: str) -> None:
    check_outcome(normalize_anthropic_body(text))
    check_outcome(normalize_anthropic_stream(text).outcome)


STREAM_EVENTS = [
    START,
    PING,
    STOP,
    _block_start(0, {"type": "text", "text": ""}),
    _block_start(1, {"type": "tool_use", "id": "t1", "name": "read", "input": {}}),
    _block_start(1, {"type": "thinking", "thinking": ""}),
    _delta(0, {"type": "text_delta", "text": "a"}),
    _delta(1, {"type": "input_json_delta", "partial_json": '{"a":'}),
    _delta(1, {"type": "input_json_delta", "partial_json": "1}"}),
    _delta(1, {"type": "thinking_delta", "thinking": "x"}),
    _block_stop(0),
    _block_stop(1),
    _message_delta("end_turn", {"output_tokens": 3}),
    _message_delta("tool_use"),
    {"type": "error", "error": {"type": "api_error", "message": "x"}},
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STREAM_EVENTS), max_size=12), st.lists(JSON_VALUES, max_size=2))
def test_any_sequence_of_events_is_accepted_canonically_or_rejected(events: list[dict[str, Any]], noise: list[Any]) -> None:
    text = _stream(*events) + "".join(f"data: {json.dumps(value)}\n\n" for value in noise)
    streamed = normalize_anthropic_stream(text)
    check_outcome(streamed.outcome)
    assert streamed.reassembly.event_count == len(events) + len(noise)


# == round trip ===============================================================


def _as_response(turn: dict[str, Any], number: int) -> dict[str, Any]:
    """What a model would answer for this assistant turn: the same blocks, as a Messages response."""
    calls = any(block["type"] == "tool_use" for block in turn["content"])
    return _body(
        *turn["content"],
        stop="tool_use" if calls else "end_turn",
        id=f"msg_{number}",
        usage={"input_tokens": 10 * number, "output_tokens": number},
    )


def test_a_multi_turn_tool_conversation_round_trips() -> None:
    """Canonical transcript -> request -> scripted responses -> canonical, turn by turn, as the loop would."""
    script = [
        AssistantMessage(
            content="I'll read both.",
            tool_calls=[_call("toolu_1", '{"path":"README.md"}'), _call("toolu_2", '{"path":"docs/ü.md"}')],
        ),
        AssistantMessage(content=None, tool_calls=[_call("toolu_3", '{"command":"ls","timeout":5}', "bash")]),
        AssistantMessage(content="It is a session journal."),
    ]
    context: list[Message] = [UserMessage("What is this project?")]
    paid = Usage()
    for number, expected in enumerate(script, 1):
        body = _request(context)
        assert anthropic_violation(body["messages"]) is None
        scripted = AssistantMessage(content=expected.content, tool_calls=expected.tool_calls)
        reply = _as_response(json.loads(anthropic_request("m", "", [UserMessage("x"), scripted], []).body)["messages"][1], number)
        outcome = normalize_anthropic_body(json.dumps(reply))
        assert isinstance(outcome, Accepted)
        assert outcome.message == expected
        paid += outcome.usage
        context.append(outcome.message)
        context.extend(ToolMessage(content=f"result of {call.id}", tool_call_id=call.id) for call in outcome.message.calls)
    final = _request([*context, UserMessage("Thanks.")])
    assert [turn["role"] for turn in final["messages"]] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert final["messages"][4]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_3", "content": "result of toolu_3"}]
    assert paid == Usage(input=60, output=6)


@settings(max_examples=200, deadline=None)
@given(transcripts(blank_text=False))
def test_every_assistant_turn_of_a_request_normalizes_back_to_its_message(messages: list[Message]) -> None:
    # Arguments that are one compact JSON object survive the trip byte for byte; other text is sent as {} by design.
    canonical = [
        message
        for message in messages
        if isinstance(message, AssistantMessage)
        and all(
            msgspec.json.encode(tool_input(call.function.arguments)).decode() == call.function.arguments for call in message.calls
        )
    ]
    for number, message in enumerate(canonical, 1):
        turn = json.loads(anthropic_request("m", "", [UserMessage("x"), message], []).body)["messages"][1]
        outcome = normalize_anthropic(_as_response(turn, number))
        assert isinstance(outcome, Accepted)
        assert outcome.message == message
