"""Outcomes that say what happened (issue 24 item 7), on the bodies a real llama-server sent
(fixtures/wire/llamacpp): an empty answer, a cut-off answer, a stream the server cut, a provider that
cannot be reached; and the words replay and view use for the last run."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import replies
from test_replay_cli import call
from test_wire_e2e import assert_sound, only_session, run
from test_wire_e2e import workspace as workspace  # a fixture

from tiny_agent.journal.state import IdleOperation, RunOperation
from tiny_agent.journal.transcript import AssistantMessage, UserMessage
from tiny_agent.loopback import LoopbackServer, Reply, streamed
from tiny_agent.stores.journal import raw_facts, read_journal
from tiny_agent.view.model import build_view
from tiny_agent.view.session_page import session_page

LLAMACPP = Path(__file__).resolve().parent.parent / "fixtures" / "wire" / "llamacpp"


def recorded(name: str, *, cut: bool = False) -> Reply:
    """A recorded body as llama-server sent it; ``cut``: the connection closes before the stream's end, as when it was killed."""
    body = (LLAMACPP / name).read_bytes()
    if name.endswith(".sse"):
        return streamed(body, break_off_after=len(body) - 1 if cut else None)
    return Reply(body=body, content_type="application/json; charset=utf-8")


def llamacpp(capsys, server: LoopbackServer, *flags: str, prompt: str = "hello") -> tuple[int, str, str]:
    return run(capsys, server, "--provider", "llamacpp", *flags, prompt=prompt)


def roles(path: Path) -> list[str]:
    return ["user" if type(m) is UserMessage else "assistant" if type(m) is AssistantMessage else "tool" for m in read_journal(path).transcript]


@pytest.mark.parametrize("name", ["empty-answer.json", "stream-empty-answer.sse"])
def test_an_empty_answer_is_a_settled_step_shown_as_empty_and_the_transcript_alternates(capsys, workspace: Path, name: str) -> None:
    with LoopbackServer([recorded(name), recorded("plain.json")]) as server:
        code, out, err = llamacpp(capsys, server)
        assert code == 1 and out == ""
        assert "(empty answer)" in err
        assert err.strip().splitlines()[-1].startswith("FAILED: the model's answer was empty (session ")
        assert "completed (normal)" not in err
        path = only_session(workspace)
        assert read_journal(path).transcript[-1] == AssistantMessage(content="")
        replayed = call(capsys, "replay", str(path))[1]
        assert "(empty answer)" in replayed and "last run: failed: the model's answer was empty" in replayed
        code, out, _ = llamacpp(capsys, server, "--continue", prompt="again")
    assert code == 0 and out.strip()
    assert roles(path) == ["user", "assistant", "user", "assistant"]
    assert_sound(path)


def test_a_blank_answer_is_an_empty_one(capsys, workspace: Path) -> None:
    with LoopbackServer([Reply(body=replies.body({"role": "assistant", "content": "   "}))]) as server:
        code, out, err = run(capsys, server)
    assert (code, out) == (1, "")
    assert "(empty answer)" in err and "FAILED: the model's answer was empty" in err
    assert read_journal(only_session(workspace)).transcript[-1] == AssistantMessage(content="   ")


@pytest.mark.parametrize("name", ["length.json", "stream-length.sse", "length-at-context-end.json"])
def test_a_cut_off_answer_is_printed_and_reported_once(capsys, workspace: Path, name: str) -> None:
    with LoopbackServer([recorded(name)]) as server:
        code, out, err = llamacpp(capsys, server)
    assert code == 1
    assert out.strip() and out.strip() in (read_journal(only_session(workspace)).transcript[-1].content or "")
    assert "completed (normal)" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("FAILED: the answer was cut off by the model's token limit (raise it with --max-tokens)")
    assert err.count("raise it with --max-tokens") == 1
    path = only_session(workspace)
    assert '"code":"length_without_calls"' in path.read_text()
    replayed = call(capsys, "replay", str(path))[1]
    assert "last run: failed: the answer was cut off by the model's token limit" in replayed


@pytest.mark.parametrize("name", ["stream-killed.sse", "stream-terminated.sse"])
def test_a_stream_the_server_cut_is_retried_and_its_bytes_kept(capsys, workspace: Path, name: str) -> None:
    with LoopbackServer([recorded(name, cut=True), recorded("stream-include-usage.sse")]) as server:
        code, out, err = llamacpp(capsys, server)
        partial = server.sent[0].body
    assert code == 0, err
    assert "the response was cut off; waiting" in err
    path = only_session(workspace)
    first, second = [fact.raw for _, fact in raw_facts(path)]
    assert first.body.encode() == partial and first.incomplete.startswith("broke off: ")
    assert second.incomplete is msgspec_unset()
    assert out.strip() == read_journal(path).transcript[-1].content.strip()
    assert_sound(path)


def test_a_cut_stream_fails_the_step_once_no_attempt_is_left(capsys, workspace: Path) -> None:
    with LoopbackServer([recorded("stream-killed.sse", cut=True)]) as server:
        code, _, err = llamacpp(capsys, server, "--retries", "0")
    assert code == 1
    assert "(attempts exhausted: 1 of 1)" in err
    assert '"code":"incomplete_response"' in only_session(workspace).read_text()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_provider_that_cannot_be_reached_leaves_the_run_open_for_resume(capsys, workspace: Path) -> None:
    port = free_port()
    base = ["--base-url", f"http://127.0.0.1:{port}/v1", "--model", "tiny", "--retry-wait", "0.01"]
    code, _, err = call(capsys, "run", "hello", *base)
    assert code == 75
    last = err.strip().splitlines()[-1]
    assert last.startswith("BLOCKED: the provider could not be reached in 3 attempts (request to 127.0.0.1 could not connect")
    path = only_session(workspace)
    handle = last.rsplit("`tiny-agent resume ", 1)[1].split("`")[0]
    assert "the run stays open" in last and "tries again once the provider is up" in last
    assert type(read_journal(path).operation) is RunOperation
    code, _, err = call(capsys, "resume", handle, "--retry-wait", "0.01")  # still down: three more attempts, still open
    assert code == 75 and "could not be reached in 6 attempts" in err
    with LoopbackServer([replies.answer("Up again.")], port=port) as server:
        code, out, err = call(capsys, "resume", handle)
        assert server.request_count == 1
    assert code == 0, err
    assert "Up again." in out
    assert type(read_journal(path).operation) is IdleOperation
    assert_sound(path)


@pytest.mark.parametrize("name", ["empty-answer.json", "length.json", "tool-choice-unknown.json"])
def test_view_words_the_last_run_as_replay_does(capsys, workspace: Path, name: str) -> None:
    with LoopbackServer([recorded(name)]) as server:
        llamacpp(capsys, server)
    path = only_session(workspace)
    replayed = call(capsys, "replay", str(path))[1]
    (words,) = [line.removeprefix("last run: ") for line in replayed.splitlines() if line.startswith("last run: ")]
    page = session_page(build_view(path, handle="h", prices={}))
    assert words.replace("'", "&#x27;").split(" (`tiny-agent audit")[0] in page
    assert ("(empty answer)" in page) == (name == "empty-answer.json")


def msgspec_unset() -> object:
    import msgspec

    return msgspec.UNSET
