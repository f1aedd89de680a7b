"""The loopback server, over real HTTP with plain httpx: routes, replies, streams in irregular pieces, capture, validation."""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import pytest
import replies
from hypothesis import given, settings
from hypothesis import strategies as st

from tiny_agent.agent.tools.builtin import READ, WRITE
from tiny_agent.journal.transcript import AssistantMessage, Message, ToolMessage, UserMessage
from tiny_agent.loopback import (
    APIS,
    DEMO_MODEL,
    DEMO_PROMPT,
    Answer,
    Api,
    Call,
    Comment,
    EndlessToolCaller,
    Event,
    LoopbackServer,
    Pieces,
    Reply,
    StreamShape,
    ToolLoopModel,
    demo_bodies,
    demo_script,
    event_stream,
    fingerprint,
    piece_sizes,
    streamed,
    whole_body,
    wire_plan,
)
from tiny_agent.wire.chat.stream import Reassembled, reassemble
from tiny_agent.wire.registry import API
from tiny_agent.wire.request import RequestOptions, WireRequest
from tiny_agent.wire.seam import Accepted, Outcome, Rejected
from tiny_agent.wire.sse import parse_events

PATHS: dict[Api, str] = {"chat": "/chat/completions", "anthropic": "/messages", "responses": "/responses"}
KEY = "sk-test-0123456789abcdefNEVERSTORED"


def valid_body(api: Api) -> dict[str, Any]:
    if api == "chat":
        return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if api == "anthropic":
        return {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    return {
        "model": "m",
        "store": False,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    }


def api_headers(api: Api) -> dict[str, str]:
    return {"anthropic-version": "2023-06-01"} if api == "anthropic" else {}


def post(
    server: LoopbackServer, api: Api, body: Any = None, headers: dict[str, str] | None = None, **options: Any
) -> httpx.Response:
    sent = valid_body(api) if body is None else body
    return httpx.post(server.url(api), json=sent, headers={**api_headers(api), **(headers or {})}, **options)


def read_raw(server: LoopbackServer, api: Api, timeout: float = 10.0) -> tuple[httpx.Response, list[bytes], Exception | None]:
    """Every read the client made of the body, as it arrived, and the error that ended it (if any)."""
    reads: list[bytes] = []
    with httpx.Client(timeout=timeout) as client:
        with client.stream("POST", server.url(api), json=valid_body(api), headers=api_headers(api)) as response:
            try:
                for chunk in response.iter_raw():
                    reads.append(chunk)
            except httpx.HTTPError as error:
                return response, reads, error
    return response, reads, None


# == routes ========================================================================


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("prefix", ["/v1", ""])
def test_every_api_has_a_route_with_and_without_v1(api, prefix):
    with LoopbackServer([replies.whole(api, replies.text_answer())]) as server:
        url = f"http://127.0.0.1:{server.port}{prefix}{PATHS[api]}"
        response = httpx.post(url, json=valid_body(api), headers=api_headers(api))
    assert response.status_code == 200
    assert response.content == whole_body(api, replies.text_answer())
    assert response.headers["content-type"] == "application/json"
    (request,) = server.requests
    assert (request.api, request.path, request.body) == (api, f"{prefix}{PATHS[api]}", valid_body(api))
    assert server.violations == []
    assert server.errors == []


@pytest.mark.parametrize(
    "method, path",
    [("POST", "/v1/completions"), ("POST", "/v1/chat"), ("GET", "/v1/chat/completions"), ("DELETE", "/v1/messages")],
)
def test_anything_else_is_404_with_a_json_error_and_takes_no_step(method, path):
    with LoopbackServer([replies.answer("kept for later")]) as server:
        response = httpx.request(method, f"http://127.0.0.1:{server.port}{path}", json={})
        assert response.status_code == 404
        assert "\n" not in response.text
        assert "no route" in response.json()["error"]["message"]
        assert post(server, "chat").json()["choices"][0]["message"]["content"] == "kept for later"
    assert [violation.rule for violation in server.violations] == ["route"]
    assert [request.api for request in server.requests] == [None, "chat"]


@pytest.mark.parametrize("api", APIS)
def test_a_step_for_another_api_is_answered_400_and_recorded(api):
    other: Api = "responses" if api == "chat" else "chat"
    with LoopbackServer([replies.whole(other, replies.text_answer()), ToolLoopModel(other, 1)]) as server:
        first = post(server, api)
        second = post(server, api)
    assert (first.status_code, second.status_code) == (400, 400)
    assert [(violation.rule, violation.request, violation.api) for violation in server.violations] == [
        ("api", 0, api),
        ("api", 1, api),
    ]
    assert f"expected a {other} request" in server.violations[0].message


def test_a_lone_model_answers_every_request_and_a_running_out_script_is_a_violation():
    with LoopbackServer(EndlessToolCaller("chat")) as server:
        assert all(post(server, "chat").json()["choices"][0]["finish_reason"] == "tool_calls" for _ in range(5))
    with LoopbackServer([]) as server:
        assert post(server, "chat").status_code == 500
    assert [violation.rule for violation in server.violations] == ["script"]


def test_a_model_that_raises_is_answered_500_and_recorded():
    def broken(body: Any) -> Reply:
        raise KeyError("messages")

    with LoopbackServer([broken]) as server:
        response = post(server, "chat")
    assert response.status_code == 500
    assert server.violations[0].rule == "script"
    assert "KeyError" in server.violations[0].message


# == whole replies, delays, hang-ups ===================================================


@pytest.mark.parametrize("api", APIS)
def test_a_whole_reply_has_its_status_content_type_and_headers(api):
    reply = replies.failure(api, 429, "slow down", retry_after="7")
    with LoopbackServer([reply, Reply(body=b"<html>502</html>", status=502, content_type="text/html")]) as server:
        limited = post(server, api)
        proxy = post(server, api)
    assert (limited.status_code, limited.headers["retry-after"], limited.content) == (429, "7", reply.body)
    assert "slow down" in limited.text
    assert (proxy.status_code, proxy.headers["content-type"], proxy.content) == (502, "text/html", b"<html>502</html>")
    assert [sent.outcome for sent in server.sent] == ["complete", "complete"]


def test_a_delay_makes_a_client_time_out_and_a_hang_up_sends_nothing():
    with LoopbackServer([Reply(body=b"{}", delay=30), Reply(hang_up=True), replies.answer("after")]) as server:
        with pytest.raises(httpx.ReadTimeout):
            post(server, "chat", timeout=3)  # well inside the 30 s delay, long enough for a loaded machine
        assert server.sent_to(0) is None, "the client gave up while the server was still delaying"
        with pytest.raises(httpx.RemoteProtocolError):
            post(server, "chat")
        assert post(server, "chat").status_code == 200
    hung_up = server.sent_to(1)
    assert hung_up is not None and hung_up.outcome == "hung_up"


def test_a_whole_body_can_break_off_too():
    body = replies.answer("a complete answer that never fully arrives").body
    with LoopbackServer([Reply(body=body, break_off_after=30)]) as server:
        response, reads, error = read_raw(server, "chat")
    assert response.headers["content-length"] == str(len(body))
    assert isinstance(error, httpx.RemoteProtocolError)
    assert b"".join(reads) == body[:30] == server.sent[0].body
    assert server.sent[0].outcome == "broken_off"


# == streams =========================================================================


def _stream_body(api: Api) -> bytes:
    shape = StreamShape(piece=3, keep_alives=True, line_end="\r\n")
    return event_stream(api, replies.parallel_calls(), shape)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 17, 4242])
def test_streamed_bytes_reassemble_to_exactly_the_scripted_bytes(api, seed):
    body = _stream_body(api)
    with LoopbackServer([streamed(body, seed=seed, api=api)]) as server:
        response, reads, error = read_raw(server, api)
    assert error is None
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["transfer-encoding"] == "chunked"
    assert b"".join(reads) == body
    assert server.sent[0].body == body
    assert server.sent[0].sizes == piece_sizes(body, Pieces(seed=seed))
    assert server.sent[0].outcome == "complete"
    assert server.errors == []


def test_a_stream_can_be_given_as_events():
    items = [Comment("OPENROUTER PROCESSING"), Event('{"a":"ünï"}'), Event("one\ntwo", event="multi"), Event("[DONE]")]
    reply = streamed(items, seed=2)
    assert (
        reply.body
        == ': OPENROUTER PROCESSING\n\ndata: {"a":"ünï"}\n\nevent: multi\ndata: one\ndata: two\n\ndata: [DONE]\n\n'.encode()
    )
    assert [(event.event, event.data) for event in parse_events(reply.body.decode())] == [
        (None, '{"a":"ünï"}'),
        ("multi", "one\ntwo"),
        (None, "[DONE]"),
    ]
    assert (reply.content_type, reply.chosen_framing) == ("text/event-stream", "chunked")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), smallest=st.integers(1, 8), spread=st.integers(0, 60))
def test_any_cut_keeps_every_byte_in_order(seed, smallest, spread):
    body = event_stream("anthropic", replies.thinking(), StreamShape(line_end="\r\n"))
    pieces = Pieces(seed=seed, smallest=smallest, largest=smallest + spread)
    plan = wire_plan(Reply(body=body, pieces=pieces))
    assert b"".join(write.data for write in plan.writes) == body
    assert all(write.data for write in plan.writes)
    assert not plan.broken_off
    assert wire_plan(Reply(body=body, pieces=pieces)) == plan, "the same seed must cut the same way"


def test_pieces_really_are_irregular_and_split_characters_and_line_ends():
    body = _stream_body("chat")
    assert "✓".encode() in body and b"\r\n" in body
    sizes = piece_sizes(body, Pieces(seed=5))
    assert len(sizes) > 10 and len(set(sizes)) > 3
    ends = [sum(sizes[: index + 1]) for index in range(len(sizes))]
    assert any(0x80 <= body[end] < 0xC0 for end in ends[:-1]), "no piece ends inside a multi-byte UTF-8 character"
    assert any(body[end - 1 : end + 1] == b"\r\n" for end in ends[:-1]), "no piece ends between a CR and its LF"
    assert piece_sizes(body, Pieces(seed=6)) != sizes


def test_the_client_sees_many_reads_of_varying_sizes():
    body = _stream_body("responses")
    with LoopbackServer(
        [streamed(body, pieces=Pieces(seed=9, smallest=20, largest=300, pause_chance=1.0, pause=0.003), api="responses")]
    ) as server:
        _, reads, error = read_raw(server, "responses")
    assert error is None
    assert b"".join(reads) == body
    assert len(reads) > 10
    assert len({len(read) for read in reads}) > 3


@pytest.mark.parametrize("api", APIS)
def test_a_chunked_stream_that_breaks_off_is_an_error_the_client_sees(api):
    body = _stream_body(api)
    with LoopbackServer(
        [streamed(body, seed=3, api=api, break_off_after=200), replies.whole(api, replies.text_answer())]
    ) as server:
        _, reads, error = read_raw(server, api)
        assert post(server, api).status_code == 200, "the server goes on serving on a new connection"
    assert isinstance(error, httpx.RemoteProtocolError)
    assert b"".join(reads) == body[:200] == server.sent[0].body
    assert (server.sent[0].outcome, server.sent[0].written) == ("broken_off", 200)


def test_a_close_delimited_stream_that_breaks_off_looks_finished_to_http():
    body = _stream_body("chat")
    with LoopbackServer([streamed(body, seed=3, framing="close", break_off_after=150)]) as server:
        response, reads, error = read_raw(server, "chat")
    assert error is None
    assert "transfer-encoding" not in response.headers and "content-length" not in response.headers
    assert b"".join(reads) == body[:150]
    assert not isinstance(reassemble(b"".join(reads).decode("utf-8", "replace")), Reassembled)


def test_a_stall_trips_an_idle_timeout_without_closing_and_a_patient_client_gets_everything():
    body = _stream_body("anthropic")
    stalling = streamed(body, seed=1, api="anthropic", stall_after=120, stall_for=30)
    brief = streamed(body, seed=1, api="anthropic", stall_after=120, stall_for=0.5)
    with LoopbackServer([stalling, brief]) as server:
        _, reads, error = read_raw(server, "anthropic", timeout=3)  # the first 120 bytes come, then 30 s of nothing
        stalled = server.sent_to(0)
        assert stalled is not None and (stalled.outcome, stalled.written) == ("sending", 120), "still stalling, not closed"
        _, patient_reads, patient_error = read_raw(server, "anthropic", timeout=30)
    assert isinstance(error, httpx.ReadTimeout)
    assert b"".join(reads) == body[:120]
    assert patient_error is None
    assert b"".join(patient_reads) == body
    assert [sent.outcome for sent in server.sent[1:]] == ["complete"]


# == capture and fingerprints ============================================================


def test_credentials_are_kept_as_fingerprints_only():
    anthropic_key = "sk-ant-api03-abcdefghijklmnop0123456789"
    sneaky = "x9Yz0123456789abcdefABCDEF0123456789zz"
    with LoopbackServer([replies.answer("a"), replies.whole("anthropic", replies.text_answer()), replies.answer("c")]) as server:
        post(server, "chat", headers={"Authorization": f"Bearer {KEY}", "X-Trace": "plain value"})
        post(server, "anthropic", headers={"x-api-key": anthropic_key})
        httpx.post(
            server.url("chat") + f"?api_key={KEY}&mode=fast",
            json=valid_body("chat"),
            headers={"api-key": KEY, "X-Custom": sneaky},
        )
    chat, anthropic, azure = server.requests
    assert chat.fingerprints == {"authorization": fingerprint(KEY)}
    assert chat.headers["authorization"] == f"Bearer {fingerprint(KEY)}"
    assert chat.headers["x-trace"] == "plain value"
    assert {"content-type", "user-agent", "authorization"} <= set(chat.header_names)
    assert anthropic.fingerprints == {"x-api-key": fingerprint(anthropic_key)}
    assert azure.fingerprints == {"api-key": fingerprint(KEY), "x-custom": fingerprint(sneaky)}
    assert azure.path == f"/v1/chat/completions?api_key={fingerprint(KEY)}&mode=fast"
    assert all(request.authorized for request in server.requests)
    stored = msgspec.json.encode([server.requests, server.violations, server.sent]) + repr(vars(server)).encode()
    for secret in (KEY, anthropic_key, sneaky):
        assert secret.encode() not in stored


def test_a_request_without_credentials_is_not_authorized():
    with LoopbackServer([replies.answer("a")]) as server:
        post(server, "chat")
    assert not server.requests[0].authorized
    assert server.requests[0].fingerprints == {}


# == validation =========================================================================

CALL = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
USE = {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "text"}
FUNCTION_CALL = {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{}"}


def _user(text: str = "hi") -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages)}


def _anthropic(*turns: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 100, "messages": list(turns), **extra}


def _responses(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "store": False, "input": list(items), **extra}


ASSISTANT_CALL = {"role": "assistant", "content": None, "tool_calls": [CALL]}
ANSWERED = {"role": "tool", "tool_call_id": "call_1", "content": "text"}

VIOLATIONS: list[tuple[str, Api, dict[str, Any], dict[str, str], str]] = [
    ("chat: no messages", "chat", {"model": "m"}, {}, "messages"),
    ("chat: tool answers nothing", "chat", _chat({"role": "user", "content": "hi"}, ANSWERED), {}, "transcript"),
    (
        "chat: tool answers twice",
        "chat",
        _chat({"role": "user", "content": "hi"}, ASSISTANT_CALL, ANSWERED, ANSWERED),
        {},
        "transcript",
    ),
    (
        "chat: user while calls open",
        "chat",
        _chat({"role": "user", "content": "hi"}, ASSISTANT_CALL, {"role": "user", "content": "and?"}),
        {},
        "transcript",
    ),
    ("chat: ends with calls open", "chat", _chat({"role": "user", "content": "hi"}, ASSISTANT_CALL), {}, "transcript"),
    ("anthropic: no max_tokens", "anthropic", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, {}, "max_tokens"),
    ("anthropic: no version", "anthropic", _anthropic({"role": "user", "content": "hi"}), {"anthropic-version": ""}, "version"),
    (
        "anthropic: key in Authorization",
        "anthropic",
        _anthropic({"role": "user", "content": "hi"}),
        {"Authorization": f"Bearer {KEY}"},
        "credentials",
    ),
    ("anthropic: starts with assistant", "anthropic", _anthropic({"role": "assistant", "content": "hi"}), {}, "alternation"),
    (
        "anthropic: two user turns",
        "anthropic",
        _anthropic({"role": "user", "content": "hi"}, {"role": "user", "content": "again"}),
        {},
        "alternation",
    ),
    (
        "anthropic: result not right after its use",
        "anthropic",
        _anthropic(
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [USE]},
            {"role": "user", "content": [RESULT]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [RESULT]},
        ),
        {},
        "tool_result",
    ),
    (
        "anthropic: result after text",
        "anthropic",
        _anthropic(
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [USE]},
            {"role": "user", "content": [{"type": "text", "text": "x"}, RESULT]},
        ),
        {},
        "tool_result",
    ),
    (
        "anthropic: use unanswered",
        "anthropic",
        _anthropic(
            {"role": "user", "content": "hi"}, {"role": "assistant", "content": [USE]}, {"role": "user", "content": "moving on"}
        ),
        {},
        "tool_result",
    ),
    ("responses: store missing", "responses", {"model": "m", "input": [_user()]}, {}, "store"),
    ("responses: store true", "responses", _responses(_user(), store=True), {}, "store"),
    (
        "responses: previous_response_id",
        "responses",
        _responses(_user(), previous_response_id="resp_1"),
        {},
        "previous_response_id",
    ),
    (
        "responses: output answers nothing",
        "responses",
        _responses(_user(), {"type": "function_call_output", "call_id": "call_1", "output": "x"}),
        {},
        "function_call_output",
    ),
    ("responses: call unanswered", "responses", _responses(_user(), FUNCTION_CALL), {}, "function_call_output"),
]


@pytest.mark.parametrize("case, api, body, headers, rule", VIOLATIONS, ids=[case[0] for case in VIOLATIONS])
def test_each_broken_rule_is_answered_400_and_recorded(case, api, body, headers, rule):
    sent_headers = {**api_headers(api), **headers}
    sent_headers = {name: value for name, value in sent_headers.items() if value}
    with LoopbackServer([replies.whole(api, replies.text_answer())]) as server:
        response = httpx.post(server.url(api), json=body, headers=sent_headers)
    assert response.status_code == 400
    assert response.text.count("\n") == 0
    assert "loopback: " + rule in response.text
    if api == "anthropic":
        assert response.json()["type"] == "error"
    else:
        assert response.json()["error"]["code"] == 400
    (violation,) = server.violations
    assert (violation.rule, violation.api, violation.request) == (rule, api, 0)
    assert "\n" not in violation.message and KEY not in violation.message


@pytest.mark.parametrize("case, api, body, headers, rule", VIOLATIONS, ids=[case[0] for case in VIOLATIONS])
def test_validation_can_be_switched_off(case, api, body, headers, rule):
    with LoopbackServer([replies.whole(api, replies.text_answer())], validate=False) as server:
        response = httpx.post(server.url(api), json=body, headers={name: value for name, value in headers.items() if value})
    assert response.status_code == 200
    assert server.violations == []


def test_valid_conversations_pass_every_rule():
    bodies: list[tuple[Api, dict[str, Any]]] = [
        (
            "chat",
            _chat(
                {"role": "system", "content": "s"},
                {"role": "user", "content": "hi"},
                ASSISTANT_CALL,
                ANSWERED,
                {"role": "assistant", "content": "ok"},
            ),
        ),
        (
            "anthropic",
            _anthropic(
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [USE]},
                {"role": "user", "content": [RESULT, {"type": "text", "text": "more"}]},
            ),
        ),
        ("responses", _responses(_user(), FUNCTION_CALL, {"type": "function_call_output", "call_id": "call_1", "output": "x"})),
    ]
    with LoopbackServer([replies.whole(api, replies.text_answer()) for api, _ in bodies]) as server:
        for api, body in bodies:
            assert post(server, api, body).status_code == 200
    assert server.violations == []


# == the project's own requests, end to end through each API =============================

TRANSCRIPT: list[Message] = [UserMessage(content="What is this project?")]


def _request(api: Api, messages: list[Message], stream: bool) -> WireRequest:
    return API[api].request("test/model", "You are careful.", messages, [READ, WRITE], RequestOptions(stream=stream))


def _outcome(api: Api, body: bytes, stream: bool) -> Outcome:
    if not stream:
        return API[api].normalize_body(body)
    if api == "chat":
        reassembled = reassemble(body.decode("utf-8"))
        assert isinstance(reassembled, Reassembled), reassembled
        return API[api].normalize(reassembled.body)
    return API[api].normalize_stream(body).outcome


def _converse(server: LoopbackServer, api: Api, stream: bool, limit: int = 50) -> list[Message]:
    """A minimal agent loop over HTTP: the project's request builders and seams, tool results made up."""
    messages = list(TRANSCRIPT)
    with httpx.Client(timeout=10) as client:
        for _ in range(limit):
            request = _request(api, messages, stream)
            response = client.post(
                server.base_url + request.path,
                content=request.body,
                headers={"content-type": "application/json", **request.headers},
            )
            assert response.status_code == 200, response.text
            outcome = _outcome(api, response.content, stream)
            assert isinstance(outcome, Accepted), outcome
            messages.append(outcome.message)
            if not outcome.message.calls:
                return messages
            messages.extend(ToolMessage(content=f"result of {call.id}", tool_call_id=call.id) for call in outcome.message.calls)
    return messages


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tool_loop_model_calls_n_times_then_answers(api, stream):
    model = ToolLoopModel(api, 4, stream=stream)
    with LoopbackServer(model) as server:
        messages = _converse(server, api, stream)
    assistants = [message for message in messages if isinstance(message, AssistantMessage)]
    assert [len(message.calls) for message in assistants] == [1, 1, 1, 1, 0]
    assert assistants[-1].content == "done"
    assert len({call.id for message in assistants for call in message.calls}) == 4
    assert server.violations == [] and server.errors == [] and model.replies == 5
    if stream:
        assert all(sent.framing == "chunked" and len(sent.sizes) > 3 for sent in server.sent)


@pytest.mark.parametrize("api", APIS)
def test_an_endless_tool_caller_never_answers(api):
    with LoopbackServer(EndlessToolCaller(api, stream=True)) as server:
        messages = _converse(server, api, stream=True, limit=6)
    assert sum(isinstance(message, AssistantMessage) for message in messages) == 6
    assert isinstance(messages[-1], ToolMessage)
    assert server.violations == []


def test_a_model_restarts_its_count_at_each_prompt():
    model = ToolLoopModel("chat", 1)
    first = _chat({"role": "user", "content": "a"}, ASSISTANT_CALL, ANSWERED)
    second = _chat(*first["messages"], {"role": "assistant", "content": "done"}, {"role": "user", "content": "again"})
    assert json.loads(model(first).body)["choices"][0]["finish_reason"] == "stop"
    assert json.loads(model(second).body)["choices"][0]["finish_reason"] == "tool_calls"


# == reply builders: whole and streamed are equivalent ====================================

ANSWERS = {
    "text": replies.text_answer(),
    "one call": replies.one_call(text="Reading it."),
    "parallel calls": replies.parallel_calls(),
    "cached usage": replies.text_answer(tokens=replies.CACHED),
    "thinking": replies.thinking(),
    "truncated": Answer(text="It is a proj", truncated=True),
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("name", list(ANSWERS))
@pytest.mark.parametrize(
    "shape",
    [StreamShape(), StreamShape(piece=1, keep_alives=True, line_end="\r\n", interleave_calls=True, usage_chunk=True)],
    ids=["plain", "awkward"],
)
def test_a_stream_normalizes_like_its_whole_body(api, name, shape):
    answer = ANSWERS[name]
    whole = _outcome(api, whole_body(api, answer), stream=False)
    streamed_outcome = _outcome(api, event_stream(api, answer, shape), stream=True)
    assert isinstance(whole, Accepted), whole
    assert isinstance(streamed_outcome, Accepted), streamed_outcome
    assert (streamed_outcome.message, streamed_outcome.stop_reason, streamed_outcome.usage) == (
        whole.message,
        whole.stop_reason,
        whole.usage,
    )
    tokens = answer.tokens
    assert (whole.usage.input, whole.usage.output, whole.usage.cacheRead) == (tokens.input, tokens.output, tokens.cache_read)
    assert whole.message.content == answer.text
    assert [(call.function.name, json.loads(call.function.arguments)) for call in whole.message.calls] == [
        (call.name, json.loads(call.arguments)) for call in answer.calls
    ]
    assert whole.stop_reason == ("length" if answer.truncated else "toolUse" if answer.calls else "stop")


@pytest.mark.parametrize("api", ["chat", "anthropic"])
def test_cache_writes_are_reported_where_the_api_has_them(api):
    outcome = _outcome(api, whole_body(api, Answer(text="hi", tokens=replies.CACHE_WRITE)), stream=False)
    assert outcome.usage.cacheWrite == 900


@pytest.mark.parametrize("api", APIS)
def test_reasoning_is_on_the_wire_and_dropped_by_the_seam(api):
    answer = replies.thinking()
    assert answer.reasoning is not None
    for body in (whole_body(api, answer), event_stream(api, answer)):
        assert answer.reasoning[:5].encode() in body, "the first delta carries the start of the reasoning"
    outcome = _outcome(api, whole_body(api, answer), stream=False)
    assert isinstance(outcome, Accepted)
    assert answer.reasoning not in msgspec.json.encode(outcome.message).decode()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("ending", ["error", "cut"])
def test_a_stream_ending_in_an_error_or_cut_off_is_rejected(api, ending):
    body = event_stream(api, replies.one_call(), StreamShape(ending=ending))
    if api == "chat":
        reassembled = reassemble(body.decode())
        assert not isinstance(reassembled, Reassembled)
        reason = reassembled.reason
    else:
        outcome = _outcome(api, body, stream=True)
        assert isinstance(outcome, Rejected)
        reason = outcome.reason
    assert ("error" in reason) if ending == "error" else ("without" in reason or "ended" in reason)
    if ending == "cut":
        assert not body.endswith(b"\n\n")


def test_the_stream_extras_are_where_the_vendors_put_them():
    chat = event_stream("chat", replies.parallel_calls(), StreamShape(piece=2, keep_alives=True, interleave_calls=True))
    assert chat.startswith(b": OPENROUTER PROCESSING\n\n")
    chunks = [json.loads(event.data) for event in parse_events(chat.decode()) if event.data != "[DONE]"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 40
    indexes = [call["index"] for chunk in chunks for choice in chunk["choices"] for call in choice["delta"].get("tool_calls", [])]
    assert indexes[:4] == [0, 1, 0, 1] and len(indexes) > 20
    anthropic = parse_events(event_stream("anthropic", replies.parallel_calls(), StreamShape(piece=2)).decode())
    assert [event.event for event in anthropic].count("ping") == 2
    assert sum('"input_json_delta"' in event.data for event in anthropic) > 20
    responses = parse_events(event_stream("responses", replies.parallel_calls()).decode())
    assert responses[-1].event == "response.completed"
    assert json.loads(responses[-1].data)["response"]["output"][1]["call_id"] == "call_1"
    assert sum(event.event == "response.function_call_arguments.delta" for event in responses) > 10


def test_anthropic_calls_need_object_arguments():
    with pytest.raises(ValueError, match="object"):
        whole_body("anthropic", Answer(calls=(Call("read", "[1]"),)))


# == the demo =============================================================================


def test_the_demo_script_is_unchanged_and_chat_only():
    assert DEMO_MODEL == "demo/loopback-1" and "README" in DEMO_PROMPT
    script = demo_script()
    assert [step.body for step in script if isinstance(step, Reply)] == demo_bodies()
    assert all(isinstance(step, Reply) and step.api == "chat" for step in script)
