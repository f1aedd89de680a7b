"""OpenAI Responses: stateless requests from the canonical transcript, and the seam back into it (whole and streamed)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_anthropic import transcripts
from test_normalize import JSON_VALUES
from wire_apis import WIRE, cases, check_outcome, fixture_record, inputs

from tiny_agent.agent.tools.builtin import BASH, READ, WRITE
from tiny_agent.journal.transcript import (
    SYNTHETIC_TEXTS,
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from tiny_agent.wire.request import RequestOptions
from tiny_agent.wire.responses import API as RESPONSES
from tiny_agent.wire.responses.request import responses_request
from tiny_agent.wire.responses.seam import ResponsesUsageDerivation
from tiny_agent.wire.seam import Accepted, NotReported, Rejected

normalize_responses = RESPONSES.normalize
normalize_responses_body = RESPONSES.normalize_body
normalize_responses_stream = RESPONSES.normalize_stream

FIXTURES = WIRE / "responses"


# == fixtures =================================================================


@pytest.mark.parametrize("name", cases(FIXTURES))
def test_fixture_gives_its_expected_outcome(name: str) -> None:
    expected = json.loads((FIXTURES / f"{name}.expected.json").read_text())
    assert fixture_record(FIXTURES, name, normalize_responses_body, normalize_responses_stream) == expected


def test_every_fixture_has_an_expectation() -> None:
    assert inputs(FIXTURES) == set(cases(FIXTURES))
    assert len(cases(FIXTURES)) >= 13


def test_a_stream_and_its_terminal_response_agree() -> None:
    streamed = normalize_responses_stream((FIXTURES / "stream-completed.sse").read_text())
    body = streamed.reassembly.body
    assert body is not None
    assert normalize_responses_body(msgspec.json.encode(body)) == streamed.outcome


# == the seam: whole bodies ===================================================


def _body(*output: dict[str, Any], status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": "gpt-x",
        "output": list(output),
        "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 25}, "output_tokens": 9, "total_tokens": 49},
        **extra,
    }


def _message(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": list(parts)}


def _text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


def _call(call_id: str, arguments: Any = '{"path":"a.txt"}', name: str = "read") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }


REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}


def _accepted(body: Any) -> Accepted:
    outcome = normalize_responses(body)
    assert isinstance(outcome, Accepted), outcome
    check_outcome(outcome)
    return outcome


def _rejected(body: Any) -> str:
    outcome = normalize_responses(body)
    assert isinstance(outcome, Rejected), outcome
    check_outcome(outcome)
    return outcome.reason


def test_output_text_parts_are_concatenated_across_message_items() -> None:
    outcome = _accepted(_body(_message(_text("Hel"), _text("lo")), REASONING, _message(_text(" world"))))
    assert outcome.message == AssistantMessage(content="Hello world")
    assert outcome.stop_reason == "stop"
    assert outcome.finish_reason == "completed"


def test_function_calls_keep_their_argument_text_verbatim() -> None:
    outcome = _accepted(_body(REASONING, _call("call_1", '{"b": 1,  "a":"ü"}'), _call("call_2", "not json")))
    assert outcome.message == AssistantMessage(
        content=None,
        tool_calls=[
            ToolCall(id="call_1", type="function", function=FunctionCall(name="read", arguments='{"b": 1,  "a":"ü"}')),
            ToolCall(id="call_2", type="function", function=FunctionCall(name="read", arguments="not json")),
        ],
    )
    assert outcome.stop_reason == "toolUse"
    assert outcome.dropped == [
        "id",
        "model",
        "output[0]",
        "output[1].id",
        "output[1].status",
        "output[2].id",
        "output[2].status",
        "usage.total_tokens",
    ]


def test_content_is_empty_without_text_or_calls() -> None:
    assert _accepted(_body(REASONING)).message == AssistantMessage(content="")
    assert _accepted(_body(_message())).message == AssistantMessage(content="")


def test_incomplete_at_the_output_cap_is_length_with_or_without_calls() -> None:
    details = {"incomplete_details": {"reason": "max_output_tokens"}}
    assert _accepted(_body(_message(_text("cut")), status="incomplete", **details)).stop_reason == "length"
    outcome = _accepted(_body(_call("call_1", '{"pa'), status="incomplete", **details))
    assert (outcome.stop_reason, outcome.finish_reason) == ("length", "max_output_tokens")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("x", 'response is "x", not an object'),
        (
            {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}},
            "provider reported an error: invalid_api_key: Incorrect API key provided",
        ),
        (
            _body(status="failed", error={"code": "server_error", "message": "boom"}),
            "provider reported an error: server_error: boom",
        ),
        (_body(status="failed"), "status failed (and error is null)"),
        ({**_body(), "object": "chat.completion"}, "the server answered in the Chat Completions format, not OpenAI Responses"),
        (_body(status="in_progress"), 'status "in_progress" is not a finished answer'),
        (_body(status="cancelled"), 'status "cancelled" is not a finished answer'),
        (_body(status=None), "status is null (expected a string)"),
        (_body(status="incomplete"), "incomplete_details is null (expected an object with a reason)"),
        (
            _body(status="incomplete", incomplete_details={"reason": "content_filter"}),
            "status incomplete (content_filter): the provider withheld the answer",
        ),
        (
            _body(status="incomplete", incomplete_details={"reason": "timeout"}),
            'status incomplete with reason "timeout", not one the seam knows',
        ),
        ({**_body(), "output": None}, "output is null (expected an array)"),
        (_body(_message({"type": "refusal", "refusal": None})), "output[0].content[0].refusal is null (expected a string)"),
        (_body(_message({"type": "refusal", "refusal": "No."}), _call("c")), "output: a refusal that also asks for tool calls"),
        (_body({"type": "mcp_approval_request", "name": "x"}), "output[0] asks for approval of an MCP call"),
        (_body(_message({"type": "output_audio"})), 'output[0].content[0].type is "output_audio", not a part the seam knows'),
        (_body(_message({"type": "output_text", "text": None})), "output[0].content[0].text is null (expected a string)"),
        (_body({**_message(_text("a")), "role": "user"}), 'output[0].role is "user" (expected "assistant")'),
        (_body({**_message(), "content": "hi"}), 'output[0].content is "hi" (expected an array)'),
        (_body({"type": "crystal_ball_call", "id": "cb_1"}), 'output[0].type is "crystal_ball_call", not an item the seam knows'),
        (_body({"type": "computer_call", "call_id": "c"}), 'output[0].type is "computer_call"'),
        (_body({"type": "custom_tool_call", "call_id": "c", "name": "x", "input": "y"}), 'output[0].type is "custom_tool_call"'),
        (_body(_call("call_1", {"path": "a"})), "output[0].arguments is an object (expected a string of JSON text)"),
        (_body(_call("")), "output[0].call_id is an empty string (expected a non-empty string)"),
        (_body({**_call("c"), "name": 3}), "output[0].name is 3 (expected a non-empty string)"),
        (_body(_call("c"), _call("c")), 'output: tool call id "c" repeats an earlier call id'),
    ],
)
def test_malformed_bodies_are_rejected_with_a_precise_reason(body: Any, reason: str) -> None:
    assert _rejected(body).startswith(reason)


def test_a_refusal_part_is_the_answer_and_hosted_items_are_activity() -> None:
    refused = _accepted(_body(_message(_text("Well. "), {"type": "refusal", "refusal": "No."})))
    assert (refused.message, refused.stop_reason) == (AssistantMessage(content="Well. No."), "refusal")
    assert "output[0].content[1].refusal" not in refused.dropped
    search = {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}
    image = {"type": "image_generation_call", "result": "AAAA", "size": "1x1"}
    hosted = _accepted(_body(search, image, _call("c")))
    assert (hosted.message.content, hosted.stop_reason) == (None, "toolUse")
    assert hosted.hosted == [
        'web_search_call completed: action {"type":"search","query":"q"}',
        'image_generation_call: size "1x1"; result 3 bytes of base64 (kept in the raw body)',
    ]


def test_usage_subtracts_the_cached_tokens_from_the_input() -> None:
    outcome = _accepted(_body(_message(_text("x"))))
    assert outcome.usage == Usage(input=15, output=9, cacheRead=25, cacheWrite=0)
    assert outcome.derivation == ResponsesUsageDerivation(input_tokens=40, cached_tokens=25, output_tokens=9)
    explained = outcome.derivation.explain()
    assert explained.startswith("input_tokens 40 − cached 25 − write 0 = input 15 (Responses counts cache reads and writes inside")
    assert outcome.derivation.cost is None


def test_input_never_goes_negative() -> None:
    usage = {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 9}, "output_tokens": 1}
    outcome = _accepted(_body(_message(_text("x")), usage=usage))
    assert outcome.usage == Usage(input=0, output=1, cacheRead=9)
    assert "(clamped at 0)" in outcome.derivation.explain()


@pytest.mark.parametrize("usage", [{}, {"input_tokens": None, "input_tokens_details": None}])
def test_absent_or_null_counters_count_as_zero(usage: Any) -> None:
    assert _accepted(_body(_message(_text("x")), usage=usage)).usage == Usage()


def test_no_usage_object_is_not_reported_not_zero() -> None:
    assert _accepted(_body(_message(_text("x")), usage=None)).usage is None


@pytest.mark.parametrize(
    ("usage", "reason", "counted"),
    [
        (
            {"input_tokens": 10, "output_tokens": -1},
            "usage.output_tokens is -1 (expected a non-negative integer)",
            Usage(input=10),
        ),
        (
            {"input_tokens": 10, "input_tokens_details": [1]},
            "usage.input_tokens_details is a list (expected an object)",
            Usage(input=10),
        ),
        (
            {"input_tokens": 2**60, "output_tokens": 3},
            f"usage.input_tokens is {2**60}, beyond the largest count the journal can hold",
            Usage(output=3),
        ),
        ("lots", "usage is a string (expected an object)", Usage()),
    ],
)
def test_a_malformed_usage_rejects_but_the_readable_counters_count(usage: Any, reason: str, counted: Usage) -> None:
    outcome = normalize_responses(_body(_message(_text("x")), usage=usage))
    assert isinstance(outcome, Rejected)
    assert (outcome.reason, outcome.usage) == (reason, counted)


def test_bodies_that_are_not_json() -> None:
    for raw, reason in (
        (b"", "response body is empty"),
        (b"{]", "response body is not JSON"),
        ('{"a":1,"a":1}', "response body is not JSON"),
    ):
        outcome = normalize_responses_body(raw)
        assert isinstance(outcome, Rejected)
        assert outcome.reason.startswith(reason)
        assert outcome.usage is None and isinstance(outcome.derivation, NotReported)


# == the seam: streams ========================================================


def _event(data: dict[str, Any], number: int) -> str:
    return f"event: {data['type']}\ndata: {json.dumps({**data, 'sequence_number': number})}\n\n"


def _stream(*events: dict[str, Any]) -> str:
    return "".join(_event(event, number) for number, event in enumerate(events))


IN_PROGRESS = {**_body(status="in_progress"), "usage": None}
CREATED = {"type": "response.created", "response": IN_PROGRESS}
DELTA = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Hi"}


def _terminal(body: dict[str, Any]) -> dict[str, Any]:
    kind = {"completed": "response.completed", "incomplete": "response.incomplete", "failed": "response.failed"}[body["status"]]
    return {"type": kind, "response": body}


def test_the_terminal_event_carries_the_response() -> None:
    text = _stream(CREATED, DELTA, _terminal(_body(_message(_text("Hi")))))
    streamed = normalize_responses_stream(text)
    assert isinstance(streamed.outcome, Accepted)
    assert streamed.outcome.message == AssistantMessage(content="Hi")
    assert streamed.reassembly.not_carried == ["events[0:2]", "events[2].sequence_number"]
    assert (streamed.reassembly.event_count, streamed.reassembly.byte_size) == (3, len(text.encode()))


def test_a_failed_response_event_is_rejected_with_its_error() -> None:
    failed = _body(status="failed", error={"code": "rate_limit_exceeded", "message": "Slow down."}, usage=None)
    streamed = normalize_responses_stream(_stream(CREATED, _terminal(failed)))
    assert isinstance(streamed.outcome, Rejected)
    assert streamed.outcome.reason == "provider reported an error: rate_limit_exceeded: Slow down."
    assert streamed.reassembly.problem is None


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        (
            [CREATED, DELTA, {"type": "error", "code": "server_error", "message": "Oops", "param": None}],
            "events[2]: stream reported an error: server_error: Oops",
        ),
        (
            [
                CREATED,
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "Too long."},
                },
            ],
            "events[1]: stream reported an error: context_length_exceeded: Too long.",
        ),
        (
            [CREATED, DELTA],
            "stream ended without response.completed, response.incomplete or response.failed (after 2 complete events)",
        ),
        ([], "stream ended without response.completed, response.incomplete or response.failed (after 0 complete events)"),
        (
            [CREATED, {"type": "response.completed", "response": IN_PROGRESS}],
            'events[1] is response.completed but its response.status is "in_progress"',
        ),
        ([CREATED, {"type": "response.completed"}], "events[1].response is missing (expected an object)"),
        (
            [_terminal(_body(_message(_text("x")))), DELTA],
            "events[1] (response.output_text.delta) comes after the terminal event events[0]",
        ),
    ],
)
def test_broken_streams_are_rejected(events: list[dict[str, Any]], reason: str) -> None:
    streamed = normalize_responses_stream(_stream(*events))
    assert isinstance(streamed.outcome, Rejected)
    check_outcome(streamed.outcome)
    assert streamed.outcome.reason == reason == streamed.reassembly.problem


def test_a_rejected_stream_keeps_the_usage_of_the_last_snapshot() -> None:
    snapshot = {**IN_PROGRESS, "usage": {"input_tokens": 300, "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 7}}
    streamed = normalize_responses_stream(_stream(CREATED, {"type": "response.in_progress", "response": snapshot}, DELTA))
    assert isinstance(streamed.outcome, Rejected)
    assert streamed.outcome.usage == Usage(input=200, output=7, cacheRead=100)
    assert streamed.outcome.response_id == "resp_1"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            'event: response.completed\ndata: {"type": "response.created"}\n\n',
            'events[0] is named "response.completed" but its data says type "response.created"',
        ),
        # [DONE] ends every stream (issue 22): it is not an event of its own.
        ("data: [DONE]\n\n", "stream ended without response.completed, response.incomplete or response.failed (after 0"),
        (b"data: {}\xc3\n\n", "stream is not UTF-8 text"),
    ],
)
def test_events_that_are_not_json_objects(text: str | bytes, reason: str) -> None:
    streamed = normalize_responses_stream(text)
    assert isinstance(streamed.outcome, Rejected)
    assert streamed.outcome.reason.startswith(reason)


# == requests =================================================================


def _tool_call(call_id: str, arguments: str = '{"path":"a.txt"}') -> ToolCall:
    return ToolCall(id=call_id, type="function", function=FunctionCall(name="read", arguments=arguments))


def test_request_is_stateless_with_instructions_and_flat_tools() -> None:
    request = responses_request("gpt-x", "Be brief.", [UserMessage("hi")], [READ])
    assert (request.path, request.headers, request.stream) == ("/responses", {}, False)
    body = json.loads(request.body)
    assert list(body) == ["model", "instructions", "input", "tools", "store"]
    assert body["store"] is False
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    assert body["tools"] == [{"type": "function", "name": "read", "description": READ.description, "parameters": READ.parameters}]


def test_request_options() -> None:
    request = responses_request("gpt-x", "", [UserMessage("hi")], [], RequestOptions(max_tokens=100, stream=True))
    body = json.loads(request.body)
    assert list(body) == ["model", "input", "max_output_tokens", "store", "stream"]
    assert (body["max_output_tokens"], body["stream"], request.stream) == (100, True, True)


def test_a_tool_conversation_becomes_input_items() -> None:
    messages: list[Message] = [
        UserMessage("Read it."),
        AssistantMessage(content="Reading.", tool_calls=[_tool_call("call_1"), _tool_call("call_2", "{bad")]),
        ToolMessage(content="file text", tool_call_id="call_1"),
        ToolMessage(content=SYNTHETIC_TEXTS["invalidArguments"], tool_call_id="call_2"),
        AssistantMessage(content=None, tool_calls=[_tool_call("call_3")]),
        ToolMessage(content="", tool_call_id="call_3"),
        AssistantMessage(content="Done."),
        UserMessage("Thanks."),
    ]
    assert json.loads(responses_request("gpt-x", "", messages, []).body)["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Read it."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"path":"a.txt"}'},
        {"type": "function_call", "call_id": "call_2", "name": "read", "arguments": "{bad"},
        {"type": "function_call_output", "call_id": "call_1", "output": "file text"},
        {"type": "function_call_output", "call_id": "call_2", "output": SYNTHETIC_TEXTS["invalidArguments"]},
        {"type": "function_call", "call_id": "call_3", "name": "read", "arguments": '{"path":"a.txt"}'},
        {"type": "function_call_output", "call_id": "call_3", "output": ""},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks."}]},
    ]


def responses_violation(items: list[dict[str, Any]]) -> str | None:
    """Stateless input rules: every call output follows its call, every call is answered, call ids are unique."""
    calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        if item["type"] == "function_call":
            if item["call_id"] in calls:
                return f"item {index} repeats call id {item['call_id']}"
            calls.add(item["call_id"])
        elif item["type"] == "function_call_output":
            if item["call_id"] not in calls or item["call_id"] in answered:
                return f"item {index} answers no open call"
            answered.add(item["call_id"])
        elif item["type"] != "message" or not item["content"]:
            return f"item {index} is {item['type']}"
    return None if calls == answered else f"unanswered calls {sorted(calls - answered)}"


@settings(max_examples=300, deadline=None)
@given(transcripts(), st.booleans())
def test_any_valid_transcript_becomes_a_stateless_request(messages: list[Message], stream: bool) -> None:
    body = json.loads(responses_request("gpt-x", "sys", messages, [READ, WRITE, BASH], RequestOptions(stream=stream)).body)
    assert responses_violation(body["input"]) is None
    assert body["store"] is False
    assert "previous_response_id" not in body and "conversation" not in body
    assert body.get("stream", False) is stream


# == the seam never raises ====================================================


@st.composite
def near_valid_bodies(draw: st.DrawFn) -> dict[str, Any]:
    output = draw(
        st.lists(st.sampled_from([_message(_text("a")), _message(), _call("c1"), _call("c2", "{}"), REASONING]), max_size=4)
    )
    status = draw(st.sampled_from(["completed", "incomplete", "failed", "in_progress"]))
    body = _body(
        *json.loads(json.dumps(output)),
        status=status,
        incomplete_details={"reason": draw(st.sampled_from(["max_output_tokens", "content_filter"]))},
    )
    containers = [body, body["usage"], *body["output"]]
    for _ in range(draw(st.integers(0, 3))):
        container = draw(st.sampled_from(containers))
        key = draw(
            st.sampled_from(
                [
                    "object",
                    "status",
                    "error",
                    "output",
                    "content",
                    "role",
                    "type",
                    "call_id",
                    "name",
                    "arguments",
                    "input_tokens",
                    "input_tokens_details",
                ]
            )
        )
        container[key] = draw(JSON_VALUES)
    return body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES)
def test_any_json_value_is_accepted_canonically_or_rejected(value: Any) -> None:
    check_outcome(normalize_responses(value))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid_bodies())
def test_near_valid_bodies_are_accepted_canonically_or_rejected(body: dict[str, Any]) -> None:
    check_outcome(normalize_responses(body))
    check_outcome(normalize_responses_body(json.dumps(body)))
    streamed = normalize_responses_stream(_stream(CREATED, {"type": "response.completed", "response": body}))
    check_outcome(streamed.outcome)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_accepted_canonically_or_rejected(text: str) -> None:
    check_outcome(normalize_responses_body(text))
    check_outcome(normalize_responses_stream(text).outcome)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from([CREATED, DELTA, _terminal(_body(_message(_text("x")))), {"type": "error", "message": "x"}]), max_size=5
    ),
    st.lists(JSON_VALUES, max_size=2),
)
def test_any_sequence_of_events_is_accepted_canonically_or_rejected(events: list[dict[str, Any]], noise: list[Any]) -> None:
    text = _stream(*events) + "".join(f"data: {json.dumps(value)}\n\n" for value in noise)
    check_outcome(normalize_responses_stream(text).outcome)


# == round trip ===============================================================


def _as_response(items: list[dict[str, Any]], number: int) -> dict[str, Any]:
    """What a model would answer: the items of one assistant message, as a Responses output (ids added, as the API does)."""
    output = [{**item, "id": f"item_{number}_{index}", "status": "completed"} for index, item in enumerate(items)]
    usage = {"input_tokens": 100 * number, "input_tokens_details": {"cached_tokens": 50 * number}, "output_tokens": number}
    return _body(REASONING, *output, usage=usage, id=f"resp_{number}")


def test_a_multi_turn_tool_conversation_round_trips() -> None:
    """Canonical transcript -> request -> scripted responses -> canonical, turn by turn, as the loop would."""
    script = [
        AssistantMessage(content="Reading both.", tool_calls=[_tool_call("call_a"), _tool_call("call_b", '{"path": "ü.md"}')]),
        AssistantMessage(content=None, tool_calls=[_tool_call("call_c", "{not json")]),
        AssistantMessage(content="It is a journal."),
    ]
    context: list[Message] = [UserMessage("What is this?")]
    paid = Usage()
    for number, expected in enumerate(script, 1):
        body = json.loads(responses_request("gpt-x", "sys", context, [READ]).body)
        assert responses_violation(body["input"]) is None
        reply = _as_response(json.loads(responses_request("gpt-x", "", [expected], []).body)["input"], number)
        outcome = normalize_responses_body(json.dumps(reply))
        assert isinstance(outcome, Accepted)
        assert outcome.message == expected
        paid += outcome.usage
        context.append(outcome.message)
        context.extend(ToolMessage(content=f"result of {call.id}", tool_call_id=call.id) for call in outcome.message.calls)
    items = json.loads(responses_request("gpt-x", "sys", context, [READ]).body)["input"]
    assert [item["type"] for item in items] == [
        "message", "message", "function_call", "function_call", "function_call_output", "function_call_output",
        "function_call", "function_call_output", "message",
    ]  # fmt: skip
    assert paid == Usage(input=300, output=6, cacheRead=300)


@settings(max_examples=200, deadline=None)
@given(transcripts(blank_text=False))
def test_every_assistant_message_of_a_request_normalizes_back_to_itself(messages: list[Message]) -> None:
    for number, message in enumerate(messages, 1):
        if not isinstance(message, AssistantMessage):
            continue
        items = json.loads(responses_request("gpt-x", "", [message], []).body)["input"]
        outcome = normalize_responses(_as_response(items, number))
        assert isinstance(outcome, Accepted)
        assert outcome.message == message
