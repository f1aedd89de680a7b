"""Every path out of the process passes the one redactor (issue 22, item 1), over all three APIs, streamed and not.

A loopback model echoes the key: in a tool call's arguments (JSON-escaped, ``\\u0073k-...``), and in its
answer (on the wire as ``\\u0073k-...`` too, and cut into 5-character deltas when streamed).  No piece of
the key may then reach the journal, stdout, stderr, replay, audit, the HTML view or the next request;
the live display never shows a piece of it; a redirect never carries it to another origin.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import msgspec
import pytest
import replies
from conftest import isolated_workspace
from hypothesis import given
from hypothesis import strategies as st
from test_replay_cli import call

from tiny_agent.agent.live import TerminalDisplay
from tiny_agent.journal.secrets import (
    MARKER,
    Secrets,
    collect_secrets,
    guarded_output,
    key_secrets,
    redact_body,
    redact_text,
    remember,
    url_secrets,
)
from tiny_agent.loopback import APIS, Answer, Call, LoopbackServer, Reply, StreamShape, event_stream
from tiny_agent.oversight.verify import verify
from tiny_agent.providers.endpoint import Endpoint
from tiny_agent.providers.http import HttpProvider, Received
from tiny_agent.providers.keys import REDACTED, safe_base_url
from tiny_agent.providers.profiles import Profile
from tiny_agent.stores.journal import raw_facts, read_journal
from tiny_agent.wire.request import WireRequest

KEY = "sk-adversary-0123456789abcdefghijklmnop"
PIECE = "adversary"
"""A word of the key that nothing else says: finding it anywhere is finding a piece of the key."""
ESCAPED = "\\u0073" + KEY[1:]
"""The key as a JSON encoder may write it: ``\\u0073k-adversary-...``."""
PROVIDERS = {"chat": "custom", "anthropic": "anthropic", "responses": "openai-responses"}


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n")


def escaped_on_the_wire(reply: Reply) -> Reply:
    """The reply with the answer's first ``sk-adversary`` written ``\\u0073k-adversary`` (inside a JSON string)."""
    body = reply.body.replace(b'"sk-', b'"\\u0073k-', 1)
    assert body != reply.body
    return msgspec.structs.replace(reply, body=body)


def echoing_script(api: str, streamed_: bool) -> list[Reply]:
    """A call to ``read`` whose path is the key (escaped in the arguments' JSON), then an answer quoting it."""
    call_ = Answer(calls=(Call("read", '{"path":"' + ESCAPED + '.txt"}'),))
    answer = Answer(text=f"{KEY} is what you sent.")
    if streamed_:
        return [replies.stream(api, call_), escaped_on_the_wire(replies.stream(api, answer))]  # type: ignore[arg-type]
    return [replies.whole(api, call_), escaped_on_the_wire(replies.whole(api, answer))]  # type: ignore[arg-type]


def files_under(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


@pytest.mark.parametrize("streamed_", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", APIS)
def test_an_echoed_key_reaches_no_journal_terminal_view_or_request(
    capsys, workspace: Path, monkeypatch: pytest.MonkeyPatch, api: str, streamed_: bool
) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", KEY)
    with LoopbackServer(echoing_script(api, streamed_)) as server:
        flags = ["--provider", PROVIDERS[api], "--base-url", server.base_url, "--model", "m", "--retries", "1"]
        code, out, err = call(capsys, "run", "go", *flags, "--durability", "process", "--stream" if streamed_ else "--no-stream")
    assert code == 0, err
    assert server.violations == []
    # stdout: the reassembled answer; stderr: the progress line with the call's arguments
    assert out == f"{MARKER} is what you sent.\n"
    assert f'"path": "{MARKER}.txt"' in err
    assert PIECE not in out + err
    # the journal: no piece of the key in any fact (raw bodies rewritten, message, toolStarted, tool result)
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    for file in files_under(workspace.parent):
        assert PIECE.encode() not in file.read_bytes(), file
    raws = [raw for _, raw in raw_facts(path)]
    assert all(raw.raw.redactions for raw in raws)
    state = read_journal(path)
    assert state.transcript[-1].content == f"{MARKER} is what you sent."
    assert verify(path).status == "ok"
    # the next request (the tool result and the assistant's call, sent back to the model)
    assert PIECE not in json.dumps(server.requests[1].body)
    # replay, audit (whose re-derivation from the stored raw agrees with the journal), the HTML view
    for command in (["replay"], ["replay", "--json"], ["audit"], ["view", "-o", "-"]):
        code, shown, err = call(capsys, *command, str(path))
        assert code == 0, err
        assert PIECE not in shown + err
    assert json.loads(call(capsys, "audit", str(path), "--json")[1])["drift"] is False


def test_a_key_in_a_prompt_or_a_tool_result_is_journaled_and_sent_redacted(capsys, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", KEY)
    (workspace / "notes.env").write_text(f"API_KEY={KEY}\n")
    with LoopbackServer([replies.read("notes.env"), replies.answer("Noted.")]) as server:
        flags = ["--base-url", server.base_url, "--model", "m", "--no-stream", "--retries", "1"]
        code, _, err = call(capsys, "run", f"remember {KEY}", *flags, "--durability", "process")
    assert code == 0, err
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    assert PIECE not in path.read_text()
    transcript = read_journal(path).transcript
    assert [transcript[index].content for index in (0, 2, 3)] == [
        f"remember {MARKER}", f"API_KEY={MARKER}\n", "Noted."
    ]
    assert all(PIECE not in json.dumps(request.body) for request in server.requests)


def test_what_an_older_version_journaled_is_redacted_on_the_way_out(capsys, workspace: Path, monkeypatch) -> None:
    """A key in a journal (no key was known when it was written) never reaches stdout, stderr or a page."""
    with LoopbackServer([replies.answer(f"the key is {KEY}")]) as server:
        code, out, err = call(capsys, "run", "go", "--base-url", server.base_url, "--model", "m", "--no-stream", "--retries", "1")
    assert code == 0 and KEY in out, err
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)  # any *_API_KEY in the environment is a secret
    page = workspace / "page.html"
    for command in (["replay"], ["replay", "--json"], ["replay", "--messages"], ["audit"], ["view", "-o", "-"]):
        code, shown, err = call(capsys, *command, str(path))
        assert code == 0, err
        assert KEY not in shown + err, command
        assert MARKER in shown or command == ["audit"]
    assert call(capsys, "view", str(path), "-o", str(page))[0] == 0
    assert KEY not in page.read_text() and MARKER in page.read_text()


def test_every_write_method_of_a_guarded_stream_is_redacted(monkeypatch) -> None:
    """write and writelines, of the text stream and of its bytes buffer: none reaches the terminal unredacted."""
    text = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    monkeypatch.setattr("sys.stdout", text)
    with guarded_output(collect_secrets(api_key=KEY)):
        sys.stdout.write(f"a {KEY}\n")
        sys.stdout.writelines([f"b {KEY}\n", "c\n"])
        sys.stdout.buffer.write(f"d {KEY}\n".encode())
        sys.stdout.buffer.writelines([f"e {KEY}\n".encode()])
    shown = text.buffer.getvalue().decode()
    assert PIECE not in shown and shown.count(MARKER) == 4 and "c\n" in shown


def test_a_key_in_the_system_prompt_is_not_sent_back_to_a_model(capsys, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", KEY)
    (workspace / "system.txt").write_text(f"use {KEY}")
    with LoopbackServer([replies.answer("ok")]) as server:
        flags = ["--base-url", server.base_url, "--model", "m", "--no-stream", "--retries", "1", "--system", "system.txt"]
        code, _, err = call(capsys, "run", "go", *flags)
    assert code == 0, err
    sent = json.dumps(server.requests[0].body)
    assert PIECE not in sent and f"use {MARKER}" in sent


# -- the live display -----------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_the_live_display_never_shows_a_piece_of_a_key(api: str) -> None:
    remember(Secrets(key_secrets(KEY)))
    answer = Answer(text=f"Your key {KEY} ok", calls=(Call("read", json.dumps({"path": KEY})),))
    stream = event_stream(api, answer, StreamShape(piece=3))  # type: ignore[arg-type]
    out, err = io.StringIO(), io.StringIO()
    display = TerminalDisplay(out, err)
    display.model_started(api, True)
    for index in range(len(stream)):
        display.model_bytes(stream[index : index + 1])
        assert "sk" not in out.getvalue(), "a start of the key was shown before the rest proved it one"
    display.model_finished()
    assert out.getvalue() == f"Your key {MARKER} ok\n"
    assert display.printed_text == f"Your key {MARKER} ok"
    assert PIECE not in err.getvalue() and MARKER in err.getvalue()


def test_text_that_only_looked_like_a_key_is_shown_once_it_is_not_one() -> None:
    remember(Secrets(key_secrets(KEY)))
    out = io.StringIO()
    display = TerminalDisplay(out, io.StringIO())
    display.model_started("chat", True)
    for piece in ("the sk", "-adv", " is not it"):
        event = {"choices": [{"index": 0, "delta": {"content": piece}}]}
        display.model_bytes(f"data: {json.dumps(event)}\n\n".encode())
    assert out.getvalue() == "the sk-adv is not it"
    display.model_finished()


# -- the body redactor --------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("piece", [1, 2, 5, 7])
def test_a_key_split_across_deltas_is_rewritten_in_every_piece(api: str, piece: int) -> None:
    secrets = collect_secrets(api_key=KEY)
    answer = Answer(text=f"a {KEY} b", calls=(Call("bash", json.dumps({"command": f"echo {ESCAPED}"})),))
    body = event_stream(api, answer, StreamShape(piece=piece)).decode()  # type: ignore[arg-type]
    redacted, count = redact_body(body, secrets)
    assert PIECE not in redacted and "\\u0073k" not in redacted.replace("\\\\", "")
    assert count >= 2
    assert redact_body(redacted, secrets) == (redacted, 0)


def test_json_escaped_and_html_escaped_spellings() -> None:
    key = "pa/ss<wörd>&42-x"
    secrets = Secrets([key])
    for spelled in (
        json.dumps(key),
        json.dumps(key).replace("/", "\\/"),
        json.dumps(key, ensure_ascii=True).replace("\\u00f6", "\\u00F6"),
        json.dumps(key).replace("p", "\\u0070").replace("<", "\\u003c").replace("&", "\\u0026"),
        '"' + key.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + '"',
    ):
        assert redact_text(spelled, secrets) == (f'"{MARKER}"', 1), spelled


def test_bearer_and_the_key_are_one_replacement_and_longer_secrets_win() -> None:
    secrets = collect_secrets(api_key=KEY)
    assert secrets.values[0] == f"Bearer {KEY}"
    assert redact_text(f"Authorization: Bearer {KEY}", secrets) == (f"Authorization: {MARKER}", 1)
    assert redact_text("abcdefghijkl", Secrets(["abcdefgh", "abcdefghijkl"])) == (MARKER, 1)
    assert redact_body(json.dumps({"error": f"bad Bearer {KEY}"}), secrets) == (json.dumps({"error": f"bad {MARKER}"}), 1)


# -- one definition of a secret -----------------------------------------------------------------------


def test_what_the_routing_identity_hides_the_redactor_hides() -> None:
    url = "https://proxy.example/v1?session=abcdef123456&x=sk-or-v1-0123456789abcdef&api-version=2024-10-21"
    assert safe_base_url(url) == f"https://proxy.example/v1?session={REDACTED}&x={REDACTED}&api-version=2024-10-21"
    secrets = collect_secrets(base_url=url)
    echoed = f"you asked for {url}"
    assert redact_text(echoed, secrets)[0] == f"you asked for https://proxy.example/v1?session={MARKER}&x={MARKER}&api-version=2024-10-21"


WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=20)


@given(name=WORD, value=WORD.filter(lambda value: len(value) >= 8))
def test_a_query_value_is_hidden_in_the_identity_exactly_when_it_is_a_secret(name: str, value: str) -> None:
    url = f"https://h.example/v1?{name}={value}"
    hidden = safe_base_url(url).endswith(f"={REDACTED}")
    assert hidden == (value in url_secrets(url))


# -- redirects --------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["bearer", "x-api-key", "api-key"])
def test_a_redirect_to_another_origin_is_not_followed_with_the_key(style: str) -> None:
    with LoopbackServer([replies.answer("never")], validate=False) as elsewhere:
        redirect = Reply(status=307, headers={"Location": elsewhere.url("chat")}, body=b"")
        with LoopbackServer([redirect], validate=False) as server:
            profile = Profile(name="custom", api="chat", base_url=None, key_variable=None, key_style=style, key_destinations=())  # type: ignore[arg-type]
            provider = HttpProvider(Endpoint(profile, server.base_url, "m", key=KEY))
            received = Received()
            provider.send(WireRequest(path="/chat/completions", body=b"{}"), received)
            provider.close()
        assert received.status == 307
        assert elsewhere.request_count == 0, "the key followed a redirect to another origin"
        assert server.requests[0].fingerprints  # the key did go to its own origin


# -- a write refused for want of a terminal --------------------------------------------------------------


def test_a_write_refused_for_want_of_a_terminal_says_so_and_the_outcome_shows_it(capsys, workspace: Path) -> None:
    script = [replies.calls(("write", json.dumps({"path": "a.txt", "content": "hi"}))), replies.answer("I could not.")]
    with LoopbackServer(script) as server:
        flags = ["--base-url", server.base_url, "--model", "m", "--no-stream", "--retries", "1"]
        code, out, err = call(capsys, "run", "write a.txt", *flags)
    assert (code, out) == (0, "I could not.\n"), err
    assert "write (call 0): Error: writing a.txt was not approved: no terminal; use --allow-write" in err
    assert "completed, but 1 write was not approved: no terminal; use --allow-write" in err
    assert not (workspace / "a.txt").exists()
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    assert "last run: completed, but 1 write was not approved: no terminal; use --allow-write" in call(capsys, "replay", str(path))[1]
    listed = json.loads(call(capsys, "sessions", "--json")[1])
    assert "not approved" in json.dumps(listed)
