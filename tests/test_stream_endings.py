"""How streams end and what they may lack (issue 22): ``data: [DONE]`` ends every API's stream, bytes after
it are never read (not even to check they are UTF-8), and Mistral's streams without ``role`` are accepted
under the ``mistral`` profile only.  Checked on the recorded shapes in fixtures/wire/streams/, through
``tiny-agent normalize`` and in full runs against the loopback server."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import replies
from hypothesis import given
from hypothesis import strategies as st
from test_replay_cli import call
from test_wire_e2e import assert_sound, only_session, run, workspace  # noqa: F401 (a fixture)

from tiny_agent.loopback import LoopbackServer, streamed
from tiny_agent.stores.journal import raw_facts
from tiny_agent.wire.registry import API
from tiny_agent.wire.sse import DONE, SseDecoder, SseEvent, parse_events, stream_events

STREAMS = Path(__file__).resolve().parent.parent / "fixtures" / "wire" / "streams"

AFTER_DONE = {
    # fixture: (content, usage input, usage output), as fixtures/wire/streams/chat-after-done/README.md says
    "openrouter-keep-alive-after-done": ("Sealed and verified.", 64, 4),
    "blank-lines-after-done": ("Done.", 42, 2),
    "invalid-utf8-after-done": ("Ok", 31, 1),
    "cut-utf8-after-done": ("Verified", None, None),  # no usage chunk: not reported
}

RESPONSES_DONE = {
    "openrouter-done-after-completed": (
        {"role": "assistant", "content": "The journal keeps every byte the provider sent, so audit can re-run it."},
        "stop",
        {"input": 96, "output": 14, "cacheRead": 0, "cacheWrite": 0, "reasoning": 0},
    ),
    "openrouter-function-call-event-lines-done": (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_01Hx7sKq2Rb9WcN4mVt8LpZe",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "README.md"}'},
                }
            ],
        },
        "toolUse",
        {"input": 1204, "output": 57, "cacheRead": 0, "cacheWrite": 0, "reasoning": 0},
    ),
}

MISTRAL = {
    "tool-call-no-role": (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "qX3vT8pLm", "type": "function", "function": {"name": "read", "arguments": '{"path": "docs/journal.md"}'}}
            ],
        },
        "toolUse",
        {"input": 412, "output": 25, "cacheRead": 0, "cacheWrite": 0},
    ),
    "tool-call-no-role-repeated-id": (
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "Zr4kW9nBq",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"pattern": "seal", "path": "tiny_agent"}'},
                }
            ],
        },
        "toolUse",
        {"input": 530, "output": 31, "cacheRead": 0, "cacheWrite": 0},
    ),
    "text-no-role": (
        {"role": "assistant", "content": "The journal is append-only: each line is one event, sealed by a hash chain."},
        "stop",
        {"input": 58, "output": 18, "cacheRead": 0, "cacheWrite": 0},
    ),
}


def normalized(capsys, *args: str) -> tuple[int, dict[str, object]]:
    code, out, err = call(capsys, "normalize", *args)
    return code, json.loads(out)


# == framing ========================================================================


def test_done_is_the_last_event_and_nothing_after_it_is_read() -> None:
    body = 'data: {"a":1}\n\ndata: [DONE]\n\ndata: {"b":2}\n\nevent: x\ndata: not json\n\n'
    assert parse_events(body) == [SseEvent('{"a":1}'), SseEvent(DONE)]


@given(st.binary(max_size=40), st.data())
def test_any_bytes_after_done_in_any_split_frame_the_same_events(junk: bytes, data: st.DataObject) -> None:
    body = b'data: {"a":1}\r\n\r\ndata: [DONE]\n\n' + junk
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        events.extend(decoder.feed(body[start:end]))
    events.extend(decoder.close())
    assert events == [SseEvent('{"a":1}'), SseEvent(DONE)]
    assert stream_events(body) == (events, len(body))


def test_bytes_that_are_not_utf8_fail_a_stream_only_before_done() -> None:
    assert stream_events(b"data: [DONE]\n\n\xff\xfe") == ([SseEvent(DONE)], 16)
    assert stream_events(b"data: x\n\n\xff\n\ndata: [DONE]\n\n") == "stream is not UTF-8 text (byte 9)"
    # [DONE] without the blank line that ends it has not ended the stream.
    assert stream_events(b"data: [DONE]\n\xff") == "stream is not UTF-8 text (byte 13)"


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_done_after_a_finished_stream_of_any_api_is_not_an_event_of_it(api: str) -> None:
    body = replies.stream(api, replies.text_answer()).body
    alone = API[api].normalize_stream(body)
    ended = API[api].normalize_stream(body + b"data: [DONE]\n\n\xff junk\n\n")
    assert ended.outcome == alone.outcome
    assert ended.reassembly.event_count == alone.reassembly.event_count
    assert ended.reassembly.problem is None


# == the recorded shapes through `tiny-agent normalize` ================================


@pytest.mark.parametrize("name", sorted(AFTER_DONE))
def test_bytes_after_done_are_ignored(capsys, name: str) -> None:
    code, shown = normalized(capsys, str(STREAMS / "chat-after-done" / f"{name}.sse"))
    content, prompt, completion = AFTER_DONE[name]
    assert code == 0, shown
    assert shown["message"] == {"role": "assistant", "content": content}
    usage = shown["usage"] or {}
    assert (usage.get("input"), usage.get("output")) == (prompt, completion)


@pytest.mark.parametrize("name", sorted(RESPONSES_DONE))
def test_a_responses_stream_ending_with_done_is_accepted(capsys, name: str) -> None:
    path = STREAMS / "responses" / f"{name}.sse"
    assert path.read_bytes().rstrip().endswith(b"data: [DONE]")
    code, shown = normalized(capsys, "--api", "responses", str(path))
    message, stop_reason, usage = RESPONSES_DONE[name]
    assert code == 0, shown
    assert (shown["message"], shown["stopReason"], shown["usage"]) == (message, stop_reason, usage)
    assert shown["stream"]["problem"] is None


@pytest.mark.parametrize("name", sorted(MISTRAL))
def test_a_mistral_stream_without_role_is_accepted_under_the_mistral_profile(capsys, name: str) -> None:
    path = str(STREAMS / "mistral" / f"{name}.sse")
    code, shown = normalized(capsys, "--provider", "mistral", path)
    message, stop_reason, usage = MISTRAL[name]
    assert code == 0, shown
    assert (shown["message"], shown["stopReason"], shown["usage"]) == (message, stop_reason, usage)
    assert {"adapter": "missing-role-is-assistant@1", "path": "choices[0].message.role", "kind": "added",
            "detail": 'no role member; added role: "assistant"'} in shown["adapted"]  # fmt: skip


@pytest.mark.parametrize("name", sorted(MISTRAL))
@pytest.mark.parametrize("provider", [None, "openai", "custom"])
def test_without_the_mistral_profile_a_stream_without_role_is_rejected(capsys, name: str, provider: str | None) -> None:
    path = str(STREAMS / "mistral" / f"{name}.sse")
    code, shown = normalized(capsys, *(["--provider", provider] if provider else []), path)
    assert code == 65
    assert shown["rejected"] == 'choices[0].message.role is missing (expected "assistant")'


# == full runs against the loopback server ============================================


def test_a_run_on_a_mistral_stream_without_role(capsys, workspace: Path) -> None:  # noqa: F811
    body = (STREAMS / "mistral" / "tool-call-no-role.sse").read_bytes()
    with LoopbackServer([streamed(body, seed=3), replies.answer("It is the journal's own docs.")]) as server:
        code, out, err = run(capsys, server, "--provider", "mistral", "--stream")
    assert code == 0, err
    assert out == "It is the journal's own docs.\n"
    path = only_session(workspace)
    assert_sound(path)
    first = next(iter(raw_facts(path)))[1]
    assert first.raw.body == body.decode("utf-8")
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert report["drift"] is False
    assert any("missing-role-is-assistant@1" in change for change in report["attempts"][0]["response"]["adapted"])


def test_a_run_on_a_stream_without_role_fails_without_the_profile(capsys, workspace: Path) -> None:  # noqa: F811
    body = (STREAMS / "mistral" / "tool-call-no-role.sse").read_bytes()
    with LoopbackServer([streamed(body, seed=3)]) as server:
        code, _, err = run(capsys, server, "--provider", "custom", "--stream", "--retries", "0")
    assert code == 1
    assert "role is missing" in err
    assert_sound(only_session(workspace))


def test_a_run_on_a_responses_stream_ending_with_done(capsys, workspace: Path) -> None:  # noqa: F811
    body = (STREAMS / "responses" / "openrouter-done-after-completed.sse").read_bytes()
    with LoopbackServer([streamed(body, seed=4)]) as server:
        code, out, err = run(capsys, server, "--provider", "custom", "--api", "responses", "--stream")
    assert code == 0, err
    assert out == "The journal keeps every byte the provider sent, so audit can re-run it.\n"
    path = only_session(workspace)
    assert_sound(path)
    assert json.loads(call(capsys, "audit", str(path), "--json")[1])["drift"] is False


def test_a_run_on_a_stream_with_bytes_that_are_not_utf8_after_done(capsys, workspace: Path) -> None:  # noqa: F811
    body = (STREAMS / "chat-after-done" / "invalid-utf8-after-done.sse").read_bytes()
    with LoopbackServer([streamed(body, seed=5)]) as server:
        code, out, err = run(capsys, server, "--provider", "custom", "--stream")
    assert code == 0, err
    assert out == "Ok\n"
    path = only_session(workspace)
    assert_sound(path)
    raw = next(iter(raw_facts(path)))[1].raw
    assert base64.b64decode(raw.bodyBase64) == body, "the raw fact keeps every byte, the ones after [DONE] too"
    assert json.loads(call(capsys, "audit", str(path), "--json")[1])["drift"] is False
