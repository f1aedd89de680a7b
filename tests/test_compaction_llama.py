"""Compaction against a real llama.cpp server (issue 26): a session that overflows the server's window is
rescued by automatic compaction and goes on, and a history larger than the window is compacted in pieces
that each fit.  Skipped, saying why, without llama-server (.ci/build-llama builds it).

The tiny models tokenize about one token per character, so the six tool definitions of a run alone take
~3,200 tokens: the run test needs -c 8192 (tiny-tools), where a real model would need far less.  Neither
test gives --context-window: the window and the characters per token are learnt from the server's
context-length error (``request (N tokens) exceeds the available context size (M tokens)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from llama_server import LlamaServer, llama_workspace
from test_compaction import Summariser, history
from test_replay_cli import call

from tiny_agent.journal.state import IdleOperation
from tiny_agent.loopback import LoopbackServer
from tiny_agent.oversight.verify import verify
from tiny_agent.stores.journal import read_journal

pytest_plugins = ["llama_server"]

TURNS = 12
"""Runs tried before the window must have overflowed (it does after about four)."""


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return llama_workspace(tmp_path, monkeypatch, "# Example\n")


def llama_flags(server: LlamaServer, model: str) -> list[str]:
    flags = ["--provider", "llamacpp", "--base-url", server.api_url, "--model", model, "--no-stream"]
    return [*flags, "--durability", "process", "--retries", "0", "--read-timeout", "120", "--attempt-timeout", "300"]


def raw_statuses(path: Path, kind: str) -> list[int]:
    """The HTTP status of every response to a run's (or a compaction's) requests, in order."""
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    facts = [fact for line in lines for fact in line]
    started = {fact["record"]["operationId"]: fact["record"]["operationKind"] for fact in facts if "operationKind" in fact.get("record", {})}
    return [fact["raw"]["status"] for fact in facts if fact["kind"] == "raw" and started[fact["operationId"]] == kind]


def test_an_overflowing_session_is_rescued_by_automatic_compaction_and_goes_on(
    capsys, workspace: Path, start_llama: Callable[..., LlamaServer]
) -> None:
    server = start_llama("tiny-tools", context=8192)
    flags = [*llama_flags(server, "tiny-tools"), "--max-tokens", "48"]
    for turn in range(TURNS):
        prompt = f"Turn {turn}: " + "please remember these words " * 40
        _, _, err = call(capsys, "run", prompt, *flags, *(["--continue"] if turn else []))
        if "compacting:" in err:
            break
    else:
        pytest.fail(f"the session never overflowed the 8192-token window in {TURNS} runs")
    assert "compacting: the provider says the context does not fit the model's 8,192-token window" in err
    assert "continuing the task in a new run after the compaction" in err
    path = only(workspace)
    state = read_journal(path)
    assert type(state.operation) is IdleOperation
    assert state.lastRunOutcome is not None and state.lastRunOutcome.errorCode != "context_length_exceeded"
    assert state.activeContext[0].content.startswith("[Compacted history]\n")
    assert raw_statuses(path, "compaction") == [200], "the summary request fit"
    statuses = raw_statuses(path, "run")
    assert statuses.count(400) == 1 and statuses[-1] == 200, "one overflow, and the continuation fit"
    assert "\"code\":\"context_length_exceeded\"" in path.read_text()
    assert verify(path).status == "ok"
    code, _, err = call(capsys, "run", "And now?", *flags, "--continue")
    assert "compacting" not in err, "the session goes on within the window"


def test_a_history_larger_than_the_window_is_compacted_in_pieces_that_fit(
    capsys, workspace: Path, start_llama: Callable[..., LlamaServer]
) -> None:
    with LoopbackServer(Summariser(), validate=False) as loopback:
        path = history(capsys, loopback, turns=6)  # ~5,000 characters: ~5,000 tokens for tiny, whose window is 2,048
    server = start_llama("tiny", context=2048)
    code, _, err = call(capsys, "compact", str(path), *llama_flags(server, "tiny"), "--keep-tokens", "0")
    assert code == 0, err
    assert "the summary request did not fit the model's 2,048-token window: compacting again in pieces that do" in err
    assert err.count("compacting a piece") >= 2
    statuses = raw_statuses(path, "compaction")
    assert statuses[0] == 400 and set(statuses[1:]) == {200}, "after the window was learnt, every piece fit"
    state = read_journal(path)
    assert len(state.activeContext) == 1 and state.activeContext[0].content.startswith("[Compacted history]\n")
    assert verify(path).status == "ok"
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    pieces = report["compactions"]
    assert [item["piece"] for item in pieces] == list(range(1, len(pieces) + 1)) and pieces[0]["pieces"] == len(pieces)


def only(workspace: Path) -> Path:
    (path,) = sorted((workspace.parent / "sessions").glob("*.jsonl"))
    return path
