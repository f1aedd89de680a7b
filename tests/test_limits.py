"""Time and size limits that hold (issue 22): servers that stall, trickle, keep a stream alive forever, or
send a gzip bomb, each ended by the limit meant for it, with what did arrive journaled and marked cut.

No assertion here is on the clock.  Each misbehaving server gives up by itself after MISBEHAVE seconds, so a
client that ignored its limit gets a complete answer and fails these tests rather than hanging; and while the
client is being judged the server is still misbehaving (``outcome == "sending"``): the client gave up first.
"""

from __future__ import annotations

import base64
import gzip
import os
import zlib
from pathlib import Path

import msgspec
import pytest
import replies
from conftest import isolated_workspace
from test_replay_cli import call

from tiny_agent.journal.facts import RawResponse
from tiny_agent.loopback import EVENT_STREAM, Comment, LoopbackServer, Pieces, Reply, encode_events
from tiny_agent.stores.journal import raw_facts, read_journal

MISBEHAVE = 30.0
"""Seconds a misbehaving server keeps at it: far past every limit the tests set, short enough to end a broken run."""
TRICKLE = Pieces(smallest=1, largest=1, pause_chance=1.0, pause=0.05, split_awkwardly=False)
"""One byte every 50 ms: never idle for long, never done (until it breaks off, MISBEHAVE seconds later)."""
TRICKLED = int(MISBEHAVE / TRICKLE.pause)
MIB = 1024 * 1024


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n")


def run(capsys, server: LoopbackServer, *flags: str) -> tuple[int, str, str]:
    return call(capsys, "run", "hi", "--base-url", server.base_url, "--model", "m", "--retries", "0", *flags)


def stored(workspace: Path) -> RawResponse:
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    assert type(read_journal(path).operation).__name__ == "IdleOperation"
    ((_, fact),) = list(raw_facts(path))
    return fact.raw


def body_of(raw: RawResponse) -> bytes:
    return raw.body.encode() if isinstance(raw.body, str) else base64.b64decode(str(raw.bodyBase64))


def still_sending(server: LoopbackServer) -> bool:
    """The server had not finished misbehaving when the client gave up."""
    sent = server.sent_to(0)
    return sent is not None and sent.outcome == "sending"


# -- time -------------------------------------------------------------------------------------------


def test_a_stalled_stream_ends_at_the_idle_timeout_not_the_read_timeout(capsys, workspace: Path) -> None:
    reply = replies.stream("chat", replies.text_answer("A long answer, " * 20), seed=7, stall_after=100, stall_for=MISBEHAVE)
    with LoopbackServer([reply]) as server:
        code, _, err = run(capsys, server, "--stream", "--stream-idle-timeout", "0.5", "--read-timeout", "600")
        assert still_sending(server)
    assert code == 1
    raw = stored(workspace)
    assert raw.incomplete == "the stream stalled: no bytes for 0.5 s (raise it with --stream-idle-timeout)"
    assert raw.incomplete in err
    assert body_of(raw) == reply.body[:100], "the bytes before the stall are journaled"


def test_a_trickled_stream_ends_at_the_attempt_deadline(capsys, workspace: Path) -> None:
    whole = replies.stream("chat", replies.text_answer("Slowly. " * 100)).body
    reply = Reply(body=whole, content_type=EVENT_STREAM, pieces=TRICKLE, break_off_after=TRICKLED)
    with LoopbackServer([reply]) as server:
        code, _, err = run(capsys, server, "--stream", "--attempt-timeout", "1", "--stream-idle-timeout", "600")
        assert still_sending(server)
    assert code == 1
    raw = stored(workspace)
    assert raw.incomplete == "timed out (the attempt took longer than 1 s; raise it with --attempt-timeout)"
    assert raw.incomplete in err
    received = body_of(raw)
    assert received and whole.startswith(received) and received != whole


def test_keep_alives_every_moment_do_not_keep_an_attempt_open(capsys, workspace: Path) -> None:
    alive = encode_events([Comment("keep-alive")] * int(MISBEHAVE / 0.05))
    piece = len(encode_events([Comment("keep-alive")]))
    reply = Reply(body=alive, content_type=EVENT_STREAM, pieces=Pieces(smallest=piece, largest=piece, pause_chance=1.0, pause=0.05))
    with LoopbackServer([reply]) as server:
        code, _, _ = run(capsys, server, "--stream", "--attempt-timeout", "1")
        assert still_sending(server)
    assert code == 1
    raw = stored(workspace)
    assert raw.incomplete == "timed out (the attempt took longer than 1 s; raise it with --attempt-timeout)"
    assert body_of(raw).startswith(b": keep-alive\n\n")


def test_a_whole_body_trickled_ends_at_the_attempt_deadline(capsys, workspace: Path) -> None:
    whole = replies.answer("Slowly. " * 100).body
    reply = Reply(body=whole, pieces=TRICKLE, framing="length", break_off_after=TRICKLED)
    with LoopbackServer([reply]) as server:
        code, _, _ = run(capsys, server, "--no-stream", "--attempt-timeout", "1")
        assert still_sending(server)
    assert code == 1
    raw = stored(workspace)
    assert raw.incomplete == "timed out (the attempt took longer than 1 s; raise it with --attempt-timeout)"
    assert whole.startswith(body_of(raw))


def test_the_attempt_deadline_holds_before_any_response(capsys, workspace: Path) -> None:
    with LoopbackServer([Reply(body=replies.answer("late").body, delay=MISBEHAVE)]) as server:
        code, _, err = run(capsys, server, "--no-stream", "--attempt-timeout", "0.5", "--read-timeout", "600")
    assert code == 1
    assert "timed out (the attempt took longer than 0.5 s; raise it with --attempt-timeout)" in err
    (path,) = (workspace.parent / "sessions").glob("*.jsonl")
    assert list(raw_facts(path)) == [], "no status line arrived: there is no response to journal"


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--attempt-timeout", "0", "--attempt-timeout must be a positive number of seconds, not 0"),
        ("--max-response-bytes", "0", "--max-response-bytes must be a positive number of bytes, not 0"),
    ],
)
def test_a_limit_must_be_positive(capsys, workspace: Path, flag: str, value: str, message: str) -> None:
    code, _, err = call(capsys, "run", "hi", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", flag, value)
    assert (code, err.strip()) == (2, f"USAGE: {message}")


def test_limits_come_from_the_environment_too(capsys, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_AGENT_MAX_RESPONSE_BYTES", "100")
    with LoopbackServer([replies.answer("x" * 500)]) as server:
        code, _, _ = run(capsys, server, "--no-stream")
    assert code == 1
    assert stored(workspace).incomplete == "the response is larger than --max-response-bytes (100): cut after 100 bytes"
    monkeypatch.setenv("TINY_AGENT_MAX_RESPONSE_BYTES", "lots")
    code, _, err = call(capsys, "run", "hi", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert (code, err.strip()) == (2, "USAGE: $TINY_AGENT_MAX_RESPONSE_BYTES must be a number of bytes, not 'lots'")


# -- size and encoding --------------------------------------------------------------------------------


def test_a_gzip_body_is_journaled_decoded_with_its_encoding(capsys, workspace: Path) -> None:
    body = replies.answer("Compressed.").body
    with LoopbackServer([Reply(body=gzip.compress(body), headers={"Content-Encoding": "gzip"})]) as server:
        code, out, err = run(capsys, server, "--no-stream")
    assert (code, out) == (0, "Compressed.\n"), err
    raw = stored(workspace)
    assert (raw.contentEncoding, body_of(raw), raw.incomplete) == ("gzip", body, msgspec.UNSET)
    assert "accept-encoding" in server.requests[0].headers


def test_a_compressed_stream_is_decoded_as_it_arrives(capsys, workspace: Path) -> None:
    stream = replies.stream("chat", replies.text_answer("Streamed and deflated."))
    reply = Reply(body=zlib.compress(stream.body), content_type=EVENT_STREAM, headers={"Content-Encoding": "deflate"}, pieces=Pieces(seed=3))
    with LoopbackServer([reply]) as server:
        code, out, err = run(capsys, server, "--stream")
    assert (code, out) == (0, "Streamed and deflated.\n"), err
    raw = stored(workspace)
    assert (raw.contentEncoding, body_of(raw)) == ("deflate", stream.body)


def test_a_gzip_bomb_is_cut_at_the_cap_on_decoded_bytes(capsys, workspace: Path) -> None:
    bomb = gzip.compress(b" " * (32 * MIB), 9)
    assert len(bomb) < MIB // 10
    with LoopbackServer([Reply(body=bomb, headers={"Content-Encoding": "gzip"})]) as server:
        code, _, err = run(capsys, server, "--no-stream", "--max-response-bytes", str(MIB))
    assert code == 1
    raw = stored(workspace)
    assert raw.contentEncoding == "gzip"
    assert raw.incomplete is not None and raw.incomplete.startswith(f"the response is larger than --max-response-bytes ({MIB}): ")
    assert f"cut after {MIB} bytes decoded from " in raw.incomplete and raw.incomplete.endswith("received (gzip)")
    assert body_of(raw) == b" " * MIB, "what was decoded up to the cap is kept"
    assert raw.incomplete in err


def test_the_cap_counts_the_bytes_received_too(capsys, workspace: Path) -> None:
    noise = os.urandom(4000)
    packed = gzip.compress(noise)
    assert len(packed) > len(noise)
    with LoopbackServer([Reply(body=packed, headers={"Content-Encoding": "gzip"})]) as server:
        code, _, _ = run(capsys, server, "--no-stream", "--max-response-bytes", str(len(noise) + 5))
    assert code == 1
    raw = stored(workspace)
    assert raw.incomplete is not None and raw.incomplete.startswith(f"the response is larger than --max-response-bytes ({len(noise) + 5}): ")
    assert noise.startswith(body_of(raw))


def test_a_plain_body_past_the_cap_keeps_exactly_the_cap(capsys, workspace: Path) -> None:
    with LoopbackServer([replies.stream("chat", replies.text_answer("y" * 5000), seed=2)]) as server:
        code, _, _ = run(capsys, server, "--stream", "--max-response-bytes", "1000")
    assert code == 1
    raw = stored(workspace)
    assert raw.incomplete == "the response is larger than --max-response-bytes (1000): cut after 1000 bytes"
    assert len(body_of(raw)) == 1000 and raw.contentEncoding is msgspec.UNSET


def test_identity_is_no_encoding(capsys, workspace: Path) -> None:
    with LoopbackServer([Reply(body=replies.answer("Plain.").body, headers={"Content-Encoding": "Identity"})]) as server:
        code, out, err = run(capsys, server, "--no-stream")
    assert (code, out) == (0, "Plain.\n"), err
    assert stored(workspace).contentEncoding is msgspec.UNSET


@pytest.mark.parametrize(
    ("encoding", "body", "reason"),
    [
        ("br", b"\x0b\x02\x80hello\x03", "the response's content-encoding 'br' is not one tiny-agent decodes (gzip, deflate)"),
        ("gzip", b"\x1f\x8bnot gzip at all", "the gzip body does not decode: "),
    ],
)
def test_a_body_that_cannot_be_decoded_fails_its_step_saying_why(capsys, workspace: Path, encoding: str, body: bytes, reason: str) -> None:
    with LoopbackServer([Reply(body=body, headers={"Content-Encoding": encoding})]) as server:
        code, _, err = run(capsys, server, "--no-stream")
    assert code == 1
    raw = stored(workspace)
    assert raw.contentEncoding == encoding
    assert raw.incomplete is not None and raw.incomplete.startswith(reason)
    assert "Traceback" not in err


# -- the environment's proxy ------------------------------------------------------------------------------


def test_a_proxy_named_by_the_environment_is_used(capsys, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackServer([replies.answer("Through the proxy.")]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("TINY_AGENT_API_KEY", "none")
        code, out, err = call(capsys, "run", "hi", "--base-url", "http://model.invalid/v1", "--model", "m", "--no-stream")
    assert (code, out) == (0, "Through the proxy.\n"), err
    assert proxy.requests[0].path == "http://model.invalid/v1/chat/completions"

