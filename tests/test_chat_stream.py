"""Chat Completions streams: bytes -> one body (pure reassembly) -> the unchanged seam; and the live view."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from conftest import PROJECT_ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiny_agent.wire.chat import API as CHAT
from tiny_agent.wire.chat.stream import (
    LiveChatView,
    Reassembled,
    Shown,
    ShownText,
    ShownToolCall,
    StreamOutcome,
    StreamRejected,
    reassemble,
    reassemble_events,
)
from tiny_agent.wire.seam import Accepted
from tiny_agent.wire.sse import SseDecoder, SseEvent, parse_events

normalize_body = CHAT.normalize_body
normalize_response = CHAT.normalize

WIRE = PROJECT_ROOT / "fixtures" / "wire"
STREAMS = WIRE / "streams" / "chat"
CASES = sorted(path.name[: -len(".sse")] for path in STREAMS.glob("*.sse"))
EQUIVALENT_CASES = [name for name in CASES if "equivalent" in json.loads((STREAMS / f"{name}.expected.json").read_text())]


def stream_text(name: str) -> str:
    # Bytes, not read_text(): universal newlines would turn the CRLF fixture into LF.
    return (STREAMS / f"{name}.sse").read_bytes().decode("utf-8")


def expected(name: str) -> dict[str, Any]:
    return json.loads((STREAMS / f"{name}.expected.json").read_text())  # type: ignore[no-any-return]


def seam_view(body: Any) -> dict[str, Any]:
    """The seam's outcome in the shape of ``tiny-agent normalize`` (and of fixtures/wire/*.expected.json)."""
    outcome = normalize_response(body)
    shown: dict[str, Any]
    if isinstance(outcome, Accepted):
        shown = {
            "message": outcome.message,
            "stopReason": outcome.stop_reason,
            "usage": outcome.usage,
            "dropped": outcome.dropped,
        }
    else:
        shown = {"rejected": outcome.reason, "usage": outcome.usage}
    return msgspec.to_builtins(shown)  # type: ignore[no-any-return]


def live(events: list[SseEvent]) -> list[Shown]:
    view = LiveChatView()
    return [shown for event in events for shown in view.push(event)]


def split_feed(raw: bytes, cuts: list[int]) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    previous = 0
    for cut in [*sorted(cuts), len(raw)]:
        events.extend(decoder.feed(raw[previous:cut]))
        previous = cut
    events.extend(decoder.close())
    return events


# -- the fixtures ------------------------------------------------------------------------------


def test_every_stream_has_an_expectation() -> None:
    expectations = {path.name[: -len(".expected.json")] for path in STREAMS.glob("*.expected.json")}
    assert expectations == set(CASES)
    assert len(CASES) >= 11


@pytest.mark.parametrize("name", CASES)
def test_stream_fixture_gives_its_expected_outcome(name: str) -> None:
    want = expected(name)
    text = stream_text(name)
    outcome = reassemble(text)
    assert outcome.bytes == len(text.encode("utf-8"))
    if "rejected" in want:
        assert isinstance(outcome, StreamRejected)
        assert msgspec.to_builtins(outcome) == want["rejected"]
        assert "\n" not in outcome.reason
        # The tokens of a rejected stream are ledgered once, by the seam's usage rules.
        assert msgspec.to_builtins(normalize_response({"usage": outcome.usage}).usage) == want["ledger"]
    else:
        assert isinstance(outcome, Reassembled)
        assert msgspec.to_builtins(outcome) == want["reassembled"]
        assert seam_view(outcome.body) == want["seam"]


@pytest.mark.parametrize("name", CASES)
def test_live_view_on_the_fixture(name: str) -> None:
    assert msgspec.to_builtins(live(parse_events(stream_text(name)))) == expected(name)["live"]


@pytest.mark.parametrize("name", EQUIVALENT_CASES)
def test_stream_normalizes_like_its_non_streamed_equivalent(name: str) -> None:
    outcome = reassemble(stream_text(name))
    assert isinstance(outcome, Reassembled)
    streamed = normalize_response(outcome.body)
    whole = normalize_body((WIRE / expected(name)["equivalent"]).read_bytes())
    assert isinstance(streamed, Accepted)
    assert isinstance(whole, Accepted)
    assert streamed.message == whole.message
    assert streamed.stop_reason == whole.stop_reason
    assert streamed.usage == whole.usage
    assert streamed.derivation == whole.derivation


def test_the_equivalence_covers_text_tool_calls_parallel_calls_and_usage() -> None:
    assert {"openai-text", "openai-tool-call-split", "parallel-tool-calls-interleaved", "openai-usage-chunk"} <= set(
        EQUIVALENT_CASES
    )


@pytest.mark.parametrize("name", CASES)
def test_the_crlf_fixture_really_has_crlf(name: str) -> None:
    raw = (STREAMS / f"{name}.sse").read_bytes()
    assert (b"\r\n" in raw) == (name == "crlf-line-ends")


# -- the rules, one at a time --------------------------------------------------------------------


def sse(*chunks: Any, done: bool = True) -> str:
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return "".join(events) + ("data: [DONE]\n\n" if done else "")


def delta(value: dict[str, Any], finish: str | None = None, index: int = 0, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": index, "delta": value, "finish_reason": finish}], **extra}


def body_of(text: str) -> dict[str, Any]:
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled), outcome
    return outcome.body


def message_of(text: str) -> dict[str, Any]:
    return body_of(text)["choices"][0]["message"]  # type: ignore[no-any-return]


def rejection_of(text: str) -> StreamRejected:
    outcome = reassemble(text)
    assert isinstance(outcome, StreamRejected), outcome
    return outcome


def test_strings_concatenate_except_index_and_type() -> None:
    text = sse(
        delta({"role": "assistant", "content": "Hel", "type": "x", "refusal": "no"}),
        delta({"content": "lo", "type": "y", "refusal": "pe"}, "stop"),
    )
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled)
    assert outcome.body["choices"][0]["message"] == {"role": "assistant", "content": "Hello", "type": "x", "refusal": "nope"}
    assert outcome.dropped == ["chunks[*].choices[*].delta.type"]


def test_tool_calls_merge_by_index_and_their_arguments_concatenate() -> None:
    text = sse(
        delta(
            {"role": "assistant", "tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "write"}}]}
        ),
        delta({"tool_calls": [{"index": 0, "id": "", "type": "function", "function": {"name": "read", "arguments": "{"}}]}),
        delta(
            {"tool_calls": [{"index": 0, "id": "call_a", "function": {"arguments": "}"}}, {"index": 1, "function": {"name": "write"}}]}
        ),
        delta({"tool_calls": [{"index": 1, "type": "function", "function": {"arguments": "[]"}}]}, "tool_calls"),
    )
    assert message_of(text) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "write", "arguments": "[]"}},
        ],
    }


@pytest.mark.parametrize(
    ("first", "later", "kept"),
    [
        ("call_1", "call_1", "call_1"),  # an identical repeat is ignored (llama-cpp-python repeats it in every fragment)
        ("call_1", "", "call_1"),  # an empty string adds nothing
        ("", "call_1", "call_1"),  # ... even first: the first non-empty value wins
        ("", "", ""),  # (and the seam then rejects the empty id)
    ],
)
@pytest.mark.parametrize("member", ["id", "type", "name"])
def test_a_calls_id_type_and_name_have_one_value(member: str, first: str, later: str, kept: str) -> None:
    def call(value: str, arguments: str) -> dict[str, Any]:
        fields = {"id": "call_9", "type": "function", "name": "read"}
        fields[member] = value
        return {"index": 0, "id": fields["id"], "type": fields["type"], "function": {"name": fields["name"], "arguments": arguments}}

    message = message_of(sse(delta({"role": "assistant", "tool_calls": [call(first, "{")]}), delta({"tool_calls": [call(later, "}")]}, "tool_calls")))
    (merged,) = message["tool_calls"]
    assert (merged["function"]["name"] if member == "name" else merged[member]) == kept
    assert merged["function"]["arguments"] == "{}"


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("id", 'event 2: choices[0].delta.tool_calls[0].id is "call_b" after "call_a" (a tool call has one id)'),
        ("type", 'event 2: choices[0].delta.tool_calls[0].type is "tool" after "function" (a tool call has one type)'),
        ("name", 'event 2: choices[0].delta.tool_calls[0].function.name is "ite" after "wr" (a tool call has one name)'),
    ],
)
def test_a_different_id_type_or_name_for_the_same_call_rejects_the_stream(member: str, reason: str) -> None:
    first = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "wr", "arguments": ""}}
    later: dict[str, Any] = {"index": 0, "function": {"arguments": "{}"}}
    if member == "name":
        later["function"]["name"] = "ite"
    else:
        later[member] = {"id": "call_b", "type": "tool"}[member]
    rejected = rejection_of(sse(delta({"role": "assistant", "tool_calls": [first]}), delta({"tool_calls": [later]}, "tool_calls")))
    assert rejected.reason == reason


def test_any_other_value_the_first_non_null_wins_and_a_different_later_one_is_listed() -> None:
    text = sse(
        delta({"role": "assistant", "content": "a", "audio": None, "annotations": [1]}),
        delta({"audio": {"id": "x"}, "annotations": [1]}),
        delta({"audio": {"id": "y"}, "annotations": None}, "stop"),
    )
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled)
    assert outcome.body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "a",
        "audio": {"id": "x"},
        "annotations": [1],
    }
    # An equal repeat loses nothing; a different later value is what reassembly did not carry.
    assert outcome.dropped == ["chunks[*].choices[*].delta.audio"]


def test_objects_outside_tool_calls_are_not_merged() -> None:
    text = sse(
        delta({"role": "assistant", "content": "", "function_call": {"name": "re"}}),
        delta({"function_call": {"name": "ad"}}, "stop"),
    )
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled)
    assert outcome.body["choices"][0]["message"]["function_call"] == {"name": "re"}
    assert outcome.dropped == ["chunks[*].choices[*].delta.function_call"]


def test_finish_reason_takes_the_last_non_null_usage_the_last_non_null_id_and_model_the_first() -> None:
    text = sse(
        {"id": "a", "model": "m1", **delta({"role": "assistant", "content": "x"}, "length"), "usage": {"prompt_tokens": 1}},
        {"id": "b", "model": None, **delta({}, None), "usage": None},
        {"id": None, "model": "m2", **delta({}, "stop"), "usage": {"prompt_tokens": 2}},
        {"id": "a", "choices": [], "usage": {"prompt_tokens": 3}},
    )
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled)
    assert outcome.body == {
        "id": "a",
        "object": "chat.completion",
        "model": "m1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3},
    }
    assert outcome.dropped == ["chunks[*].id", "chunks[*].model", "chunks[*].choices[*].finish_reason", "chunks[*].usage"]


def test_choices_merge_by_their_index_and_are_listed_in_index_order() -> None:
    text = sse(
        {
            "choices": [
                {"index": 1, "delta": {"role": "assistant", "content": "B"}},
                {"index": 0, "delta": {"role": "assistant", "content": "A"}},
            ]
        },
        {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]},
        {"choices": [{"index": 1, "delta": {"content": "b"}, "finish_reason": "length"}]},
    )
    choices = body_of(text)["choices"]
    assert [(choice["index"], choice["message"]["content"], choice["finish_reason"]) for choice in choices] == [
        (0, "Aa", "stop"),
        (1, "Bb", "length"),
    ]


def test_dropped_paths_are_one_syntax_deduplicated_in_first_seen_order() -> None:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"index": 0, "id": "k", "type": "function", "function": {"name": "f", "arguments": "", "strict": 1}}
                    ],
                },
                "logprobs": None,
                "finish_reason": None,
            }
        ],
        "system_fingerprint": "fp",
    }
    later = json.loads(json.dumps(chunk))
    later["choices"][0]["delta"]["tool_calls"][0]["function"]["strict"] = 2
    later["choices"][0]["finish_reason"] = "tool_calls"
    outcome = reassemble(sse(chunk, later, later))
    assert isinstance(outcome, Reassembled)
    assert outcome.dropped == [
        "chunks[*].object",
        "chunks[*].created",
        "chunks[*].choices[*].logprobs",
        "chunks[*].system_fingerprint",
        "chunks[*].choices[*].delta.tool_calls[*].function.strict",
    ]


def test_content_is_always_present_and_tool_calls_only_when_a_piece_arrived() -> None:
    assert message_of(sse(delta({"role": "assistant"}, "stop"))) == {"role": "assistant", "content": None}
    assert message_of(
        sse(delta({"role": "assistant", "tool_calls": []}), delta({"content": "x", "tool_calls": None}, "stop"))
    ) == {
        "role": "assistant",
        "content": "x",
    }


def test_role_keeps_its_first_value_and_a_different_role_is_rejected() -> None:
    assert (
        message_of(sse(delta({"role": "assistant", "content": "a"}), delta({"role": "assistant", "content": "b"}, "stop")))[
            "role"
        ]
        == "assistant"
    )
    assert message_of(sse(delta({"role": None, "content": "a"}), delta({"role": "assistant"}, "stop")))["role"] == "assistant"
    rejected = rejection_of(sse(delta({"role": "assistant", "content": "a"}), delta({"role": "tool"}, "stop")))
    assert rejected.reason == 'event 2: choices[0].delta.role is "tool" after "assistant" (a message has one role)'
    # No role at all: reassembly does not invent one; the seam rejects the body.
    body = body_of(sse(delta({"content": "a"}, "stop")))
    assert seam_view(body)["rejected"] == 'choices[0].message.role is missing (expected "assistant")'


def test_an_error_chunk_is_rejected_and_its_usage_kept() -> None:
    usage = {"prompt_tokens": 9, "completion_tokens": 1}
    rejected = rejection_of(
        sse(
            delta({"role": "assistant", "content": "a"}),
            {"error": {"message": "overloaded", "code": "server_error"}, "usage": usage},
        )
    )
    assert rejected.reason == "event 2: provider reported an error: server_error: overloaded"
    assert rejected.usage == usage
    assert rejected.chunks == 2
    # error: null is no error (the seam reads it the same way), and is listed as not carried.
    outcome = reassemble(sse({"error": None, **delta({"role": "assistant", "content": "a"}, "stop")}))
    assert isinstance(outcome, Reassembled)
    assert outcome.dropped == ["chunks[*].error"]


def test_usage_that_arrived_before_a_rejection_is_returned() -> None:
    text = sse({"choices": [], "usage": {"prompt_tokens": 5}}).replace("data: [DONE]\n\n", "") + "data: {nope\n\n"
    rejected = rejection_of(text)
    assert rejected.reason.startswith("event 2: data is not JSON: ")
    assert rejected.usage == {"prompt_tokens": 5}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            '{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}',
            'event 1: data is not JSON: duplicate object key "content"',
        ),
        ('{"choices":[{"index":0,"delta":{"content":"\\ud800"}}]}', "event 1: data is not JSON: "),
        ("", "event 1: data is not JSON: "),
        ("[DONE] ", "event 1: data is not JSON: "),
        ("[1]", "event 1: chunk is a list (expected an object)"),
        ('{"choices":{}}', "event 1: choices is an object (expected an array)"),
        ('{"choices":[7]}', "event 1: choices[0] is a number (expected an object)"),
        ('{"choices":[{"delta":{}}]}', "event 1: choices[0].index is missing (expected a non-negative integer)"),
        ('{"choices":[{"index":-1}]}', "event 1: choices[0].index is -1 (expected a non-negative integer)"),
        ('{"choices":[{"index":true}]}', "event 1: choices[0].index is a boolean (expected a non-negative integer)"),
        ('{"choices":[{"index":0,"delta":"hi"}]}', "event 1: choices[0].delta is a string (expected an object)"),
        (
            '{"choices":[{"index":0,"delta":{"tool_calls":{}}}]}',
            "event 1: choices[0].delta.tool_calls is an object (expected an array)",
        ),
        (
            '{"choices":[{"index":0,"delta":{"tool_calls":[null]}}]}',
            "event 1: choices[0].delta.tool_calls[0] is null (expected an object)",
        ),
        (
            '{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"x"}]}}]}',
            "event 1: choices[0].delta.tool_calls[0].index is missing (expected a non-negative integer)",
        ),
        ('{"error":"boom"}', 'event 1: provider reported an error: "boom"'),
    ],
)
def test_a_bad_chunk_is_rejected_naming_the_event_and_the_path(data: str, reason: str) -> None:
    rejected = rejection_of(f": keep-alive\n\ndata: {data}\n\ndata: [DONE]\n\n")
    assert rejected.reason.startswith(reason)
    assert rejected.chunks == 1
    assert "\n" not in rejected.reason


def test_a_member_that_changes_kind_is_rejected() -> None:
    first = delta({"role": "assistant", "content": "a", "tool_calls": [{"index": 0, "function": {"arguments": "{"}}]})
    rejected = rejection_of(sse(first, delta({"content": ["part"]})))
    assert rejected.reason == "event 2: choices[0].delta.content is a list after a string (the pieces cannot be joined)"
    rejected = rejection_of(sse(first, delta({"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]})))
    assert (
        rejected.reason
        == "event 2: choices[0].delta.tool_calls[0].function.arguments is an object after a string (the pieces cannot be joined)"
    )
    rejected = rejection_of(sse(first, delta({"tool_calls": [{"index": 0, "function": "read"}]})))
    assert (
        rejected.reason
        == "event 2: choices[0].delta.tool_calls[0].function is a string after an object (the pieces cannot be joined)"
    )
    rejected = rejection_of(sse(delta({"role": "assistant", "reasoning_details": [1]}), delta({"reasoning_details": "x"})))
    assert rejected.reason == "event 2: choices[0].delta.reasoning_details is a string after a list (the pieces cannot be joined)"


def test_a_stream_without_a_finish_reason_for_choice_0_is_rejected() -> None:
    assert rejection_of("").reason == "the stream has no events (without a finish_reason for choice 0)"
    assert rejection_of(": only a comment\n\n").reason == "the stream has no events (without a finish_reason for choice 0)"
    assert rejection_of(sse(delta({"role": "assistant", "content": "a"}))).reason == (
        "event 2: [DONE] arrived without a finish_reason for choice 0"
    )
    assert rejection_of(sse(delta({"content": "a"}), done=False)).reason == (
        "the stream ended after event 1 without a finish_reason for choice 0"
    )
    # Choice 1 finishing is not choice 0 finishing.
    assert rejection_of(sse(delta({"content": "a"}, "stop", index=1))).reason.endswith("without a finish_reason for choice 0")


def test_done_ends_the_stream_and_counts_as_no_chunk() -> None:
    text = sse(delta({"role": "assistant", "content": "a"}, "stop")) + "data: {bad\n\n" + sse(delta({"content": "b"}))
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled)
    assert (outcome.chunks, outcome.done, outcome.body["choices"][0]["message"]["content"]) == (1, True, "a")
    without_done = reassemble(sse(delta({"role": "assistant", "content": "a"}, "stop"), done=False))
    assert isinstance(without_done, Reassembled)
    assert (without_done.chunks, without_done.done) == (1, False)


def test_framing_is_sse_fields_and_comments() -> None:
    text = (
        ": OPENROUTER PROCESSING\r\n\r\n"
        "event: message\r\nid: 4\r\nretry: 10\r\n"
        'data: {"choices":[{"index":0,\r\ndata: "delta":{"role":"assistant","content":"é"},"finish_reason":"stop"}]}\r\n\r\n'
        "data: [DONE]\r\n\r\n"
    )
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled)
    assert outcome.body["choices"][0]["message"]["content"] == "é"
    assert outcome.bytes == len(text.encode("utf-8"))


def test_a_body_that_is_plain_json_is_no_stream() -> None:
    assert rejection_of((WIRE / "openai-stop.json").read_text()).reason.startswith("the stream has no events")


def test_an_object_where_an_identifier_belongs_is_kept_whole() -> None:
    call = {"index": 0, "id": "a", "type": {"kind": "function"}, "function": {"name": "f", "arguments": ""}}
    outcome = reassemble(sse(delta({"role": "assistant", "tool_calls": [call]}), delta({"tool_calls": [call]}, "tool_calls")))
    assert isinstance(outcome, Reassembled)
    assert outcome.body["choices"][0]["message"]["tool_calls"][0]["type"] == {"kind": "function"}
    assert outcome.dropped == []
    assert seam_view(outcome.body)["rejected"] == 'choices[0].message.tool_calls[0].type is an object (expected "function")'


def test_nesting_too_deep_to_merge_is_a_rejection_not_an_exception() -> None:
    deep = "[" * 900 + "]" * 900
    arguments = '{"a":' * 950 + "1" + "}" * 950
    for chunk in (
        f'{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{arguments}}}]}},"finish_reason":"stop"}}]}}',
        f'{{"choices":[{{"index":0,"delta":{{"x":{deep}}},"finish_reason":"stop"}}]}}',
    ):
        outcome = reassemble(f"data: {chunk}\n\n")
        assert isinstance(outcome, (Reassembled, StreamRejected))


# -- the live view -------------------------------------------------------------------------------


def test_live_view_announces_a_call_when_the_next_index_starts() -> None:
    text = sse(
        delta({"role": "assistant", "content": "Let me look.", "reasoning": "hidden"}),
        delta({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "read", "arguments": '{"p'}}]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": '":1}'}}]}),
        delta({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}),
        delta({}, "tool_calls"),
    )
    view = LiveChatView()
    steps = [view.push(event) for event in parse_events(text)]
    assert steps == [
        [ShownText(text="Let me look.")],
        [],
        [],
        [ShownToolCall(index=0, id="a", name="read", arguments='{"p":1}')],
        [ShownToolCall(index=1, id="b", name="ls", arguments="{}")],
        [],
    ]


def test_live_view_announces_pending_calls_at_done_and_shows_nothing_after_a_rejection() -> None:
    call = delta({"role": "assistant", "tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": 1}}}]})
    assert live(parse_events(sse(call))) == [ShownToolCall(index=0, id="a", name="f", arguments='{"x":1}')]
    rejected = sse(
        delta({"role": "assistant", "content": "a"}), call, {"error": {"message": "x"}}, delta({"content": "never"}, "stop")
    )
    assert live(parse_events(rejected)) == [ShownText(text="a")]


def test_live_view_revises_interleaved_calls_only_at_the_end() -> None:
    def head(index: int, arguments: str) -> dict[str, Any]:
        return delta({"tool_calls": [{"index": index, "id": f"c{index}", "function": {"name": "f", "arguments": arguments}}]})

    def piece(index: int, arguments: str) -> dict[str, Any]:
        return delta({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})

    text = sse(head(0, "{"), head(1, "["), piece(0, "}"), head(2, "1"), piece(1, "]"), delta({}, "tool_calls"))
    view = LiveChatView()
    steps = [view.push(event) for event in parse_events(text)]
    assert steps == [
        [],
        [ShownToolCall(index=0, id="c0", name="f", arguments="{")],
        [],
        [ShownToolCall(index=1, id="c1", name="f", arguments="[")],
        [],
        [
            ShownToolCall(index=2, id="c2", name="f", arguments="1"),
            ShownToolCall(index=0, id="c0", name="f", arguments="{}", revised=True),
            ShownToolCall(index=1, id="c1", name="f", arguments="[]", revised=True),
        ],
        [],
    ]


def test_live_view_shows_only_choice_0() -> None:
    text = sse(
        {"choices": [{"index": 1, "delta": {"content": "other"}}, {"index": 0, "delta": {"content": "mine"}}]},
        {
            "choices": [
                {
                    "index": 1,
                    "delta": {"tool_calls": [{"index": 0, "id": "z", "function": {"name": "n"}}]},
                    "finish_reason": "stop",
                }
            ]
        },
        delta({}, "stop"),
    )
    assert live(parse_events(text)) == [ShownText(text="mine")]


# -- properties ----------------------------------------------------------------------------------

_PIECES = st.text(st.characters(codec="utf-8"), max_size=6)


class _Call(msgspec.Struct):
    id: str
    name: str
    arguments: list[str]


@st.composite
def valid_streams(draw: st.DrawFn) -> tuple[str, dict[str, Any], bool]:
    """A stream built from a known message, in arbitrary pieces; whether its calls arrive in sequence."""
    content = draw(st.none() | st.lists(_PIECES, min_size=1, max_size=8))
    reasoning = draw(st.lists(_PIECES, max_size=4))
    calls = draw(
        st.lists(
            st.builds(
                _Call,
                id=st.text("abc_0123", min_size=1, max_size=5),
                name=st.text("rwls", min_size=1, max_size=4),
                arguments=st.lists(_PIECES, max_size=5),
            ),
            max_size=3,
        )
    )
    # Queues of deltas, one per stream of pieces; their interleaving is drawn below.
    queues: list[list[dict[str, Any]]] = []
    queues.append([{"content": piece} for piece in content or []])
    queues.append([{"reasoning_content": piece} for piece in reasoning])
    for index, call in enumerate(calls):
        head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        pieces = [{"index": index, "function": {"arguments": piece}} for piece in call.arguments]
        for piece in pieces:
            # Later fragments may repeat the call's id, type and name, or send them empty (llama-cpp-python, Mistral).
            repeat = draw(st.sampled_from(["", "same", "empty"]))
            if repeat:
                piece.update({"id": call.id if repeat == "same" else "", "type": "function" if repeat == "same" else ""})
                piece["function"]["name"] = call.name if repeat == "same" else ""
        queues.append([{"tool_calls": [piece]} for piece in [head, *pieces]])
    sequential = draw(st.booleans())
    deltas: list[dict[str, Any]] = [{"role": "assistant"}]
    if sequential:
        for queue in queues:
            deltas.extend(queue)
    else:
        while any(queues):
            queue = draw(st.sampled_from([queue for queue in queues if queue]))
            deltas.append(queue.pop(0))
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    usage = draw(
        st.none() | st.fixed_dictionaries({"prompt_tokens": st.integers(0, 10**6), "completion_tokens": st.integers(0, 10**6)})
    )
    chunks: list[dict[str, Any]] = [
        {"id": "s", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
        for d in deltas
    ]
    chunks.append({"id": "s", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage is not None:
        chunks.append({"id": "s", "choices": [], "usage": usage})
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    ascii_only = draw(st.booleans())
    events = []
    for chunk in chunks:
        if draw(st.integers(0, 5)) == 0:
            events.append(": OPENROUTER PROCESSING" + end + end)
        events.append("data: " + json.dumps(chunk, ensure_ascii=ascii_only) + end + end)
    if draw(st.booleans()):
        events.append("data: [DONE]" + end + end)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) if content is not None else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [
            {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.arguments)},
            }
            for index, call in enumerate(calls)
        ]
    want = {
        "id": "s",
        "object": "chat.completion",
        "model": None,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return "".join(events), want, sequential


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams())
def test_a_message_in_any_pieces_reassembles_to_itself(stream: tuple[str, dict[str, Any], bool]) -> None:
    text, want, _ = stream
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled)
    assert outcome.body["choices"][0]["message"] == want["choices"][0]["message"]
    assert outcome.body == want


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(valid_streams().map(lambda stream: stream[0]), st.sampled_from(CASES).map(stream_text)), st.data())
def test_any_split_of_the_bytes_reassembles_like_the_whole_body(text: str, data: st.DataObject) -> None:
    raw = text.encode("utf-8")
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=20))
    events = split_feed(raw, cuts)
    assert reassemble_events(events, len(raw)) == reassemble(text)
    assert live(events) == live(parse_events(text))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_streams())
def test_live_view_shows_the_text_and_every_call_in_its_final_form(stream: tuple[str, dict[str, Any], bool]) -> None:
    text, want, sequential = stream
    shown = live(parse_events(text))
    message = want["choices"][0]["message"]
    assert "".join(item.text for item in shown if isinstance(item, ShownText)) == (message["content"] or "")
    final: dict[int, ShownToolCall] = {}
    for item in shown:
        if isinstance(item, ShownToolCall):
            final[item.index] = item
    calls = message.get("tool_calls", [])
    assert [(item.id, item.name, item.arguments) for _, item in sorted(final.items())] == [
        (call["id"], call["function"]["name"], call["function"]["arguments"]) for call in calls
    ]
    if sequential:
        announced = [item for item in shown if isinstance(item, ShownToolCall)]
        assert len(announced) == len(calls)
        assert not any(item.revised for item in announced)


_KEYS = st.sampled_from(
    [
        "choices",
        "index",
        "delta",
        "content",
        "role",
        "tool_calls",
        "function",
        "arguments",
        "name",
        "id",
        "type",
        "finish_reason",
        "usage",
        "error",
        "model",
        "x",
    ]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.text(max_size=3) | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)
_LINE = st.one_of(
    _JSON.map(lambda value: "data: " + json.dumps(value)),
    st.sampled_from(["data: [DONE]", "", "", ": keep-alive", "data:", "event: x", "data: {", "\ufeff", 'data: "\\ud800"']),
    st.text(max_size=12),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_LINE, st.sampled_from(["\n", "\r\n", "\r"])), max_size=12))
def test_any_text_at_all_reassembles_or_is_rejected(lines: list[tuple[str, str]]) -> None:
    text = "".join(line + end for line, end in lines)
    check_total(text)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=())))
def test_any_unicode_text_reassembles_or_is_rejected(text: str) -> None:
    # Surrogates included: a str from anywhere, not only from valid UTF-8.
    check_total(text)


def check_total(text: str) -> None:
    outcome: StreamOutcome = reassemble(text)
    assert isinstance(outcome, (Reassembled, StreamRejected))
    assert outcome.bytes == len(text.encode("utf-8", "surrogatepass"))
    if isinstance(outcome, StreamRejected):
        assert outcome.reason
        assert "\n" not in outcome.reason
    else:
        msgspec.json.encode(outcome.body)
        normalize_response(outcome.body)
    view = LiveChatView()
    for event in parse_events(text):
        view.push(event)


# == every real shape of a streamed tool call: one id, one type, one name; the arguments concatenate (issue 24) ==

REAL_CALL_STREAMS = [
    "streams/chat/openai-tool-call-split.sse",
    "streams/chat/openrouter-reasoning-tool-call.sse",
    "streams/chat/parallel-tool-calls-interleaved.sse",
    "streams/mistral/tool-call-no-role.sse",
    "streams/mistral/tool-call-no-role-repeated-id.sse",
    "llamacpp/stream-tool-call.sse",
    "llamacpp-python/stream-tool-call-forced.sse",
    "llamacpp-python/stream-tool-call-forced-ping.sse",
]


def calls_by_the_rule(text: str) -> list[dict[str, Any]]:
    """The calls as the rule says, read straight from the chunks: first non-empty id/type/name, arguments joined."""
    calls: dict[int, dict[str, Any]] = {}
    for event in parse_events(text):
        if event.data == "[DONE]":
            break
        for choice in json.loads(event.data).get("choices") or []:
            for piece in (choice.get("delta") or {}).get("tool_calls") or []:
                call = calls.setdefault(piece["index"], {"id": "", "type": "", "name": "", "arguments": ""})
                function = piece.get("function") or {}
                for key, value in (("id", piece.get("id")), ("type", piece.get("type")), ("name", function.get("name"))):
                    if value and not call[key]:
                        call[key] = value
                call["arguments"] += function.get("arguments") or ""
    return [calls[index] for index in sorted(calls)]


@pytest.mark.parametrize("name", REAL_CALL_STREAMS)
def test_every_recorded_tool_call_stream_reassembles_by_the_one_rule(name: str) -> None:
    text = (WIRE / name).read_bytes().decode("utf-8")
    outcome = reassemble(text)
    assert isinstance(outcome, Reassembled), outcome
    merged = outcome.body["choices"][0]["message"]["tool_calls"]
    want = calls_by_the_rule(text)
    assert [
        {"id": call["id"], "type": call.get("type", ""), "name": call["function"]["name"], "arguments": call["function"]["arguments"]}
        for call in merged
    ] == want
    assert all(call["name"] in ("read", "grep") for call in want), "a name is never doubled (readread...)"


def test_llama_cpp_python_repeats_id_type_and_name_in_every_fragment_and_the_call_is_its_whole_twin() -> None:
    streamed = reassemble((WIRE / "llamacpp-python" / "stream-tool-call-forced.sse").read_bytes().decode("utf-8"))
    assert isinstance(streamed, Reassembled)
    (call,) = streamed.body["choices"][0]["message"]["tool_calls"]
    whole = json.loads((WIRE / "llamacpp-python" / "tool-call-forced.json").read_bytes())["choices"][0]["message"]
    assert call["function"] == whole["tool_calls"][0]["function"]
    assert call["type"] == "function"
    assert call["id"].startswith("call__0_read_cmpl-") and call["id"].count("call_") == 1


def test_the_mistral_repeated_id_is_one_id() -> None:
    outcome = reassemble((WIRE / "streams" / "mistral" / "tool-call-no-role-repeated-id.sse").read_bytes().decode("utf-8"))
    assert isinstance(outcome, Reassembled)
    (call,) = outcome.body["choices"][0]["message"]["tool_calls"]
    assert (call["id"], call["function"]["name"]) == ("Zr4kW9nBq", "grep")
    assert call["function"]["arguments"] == '{"pattern": "seal", "path": "tiny_agent"}'
