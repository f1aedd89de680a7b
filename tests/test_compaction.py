"""Compaction written by tiny-agent: the compact command, automatic compaction in a long tool session
(the run ends, the history is summarised, a continuation run goes on), a provider's context-length
error, and recovery after a crash at every point of a compaction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import replies
from conftest import PROJECT_ROOT, isolated_workspace
from test_checkpoints import checkpointed, outcome
from test_replay_cli import call

from tiny_agent.agent import compaction
from tiny_agent.fold import Fold
from tiny_agent.fold.snapshot import capture
from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.journal.state import IdleOperation
from tiny_agent.journal.transcript import UserMessage
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.oversight.verify import verify
from tiny_agent.stores import checkpoints
from tiny_agent.stores.journal import read_journal
from tiny_agent.view.model import build_view
from tiny_agent.view.session_page import session_page


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return isolated_workspace(tmp_path, monkeypatch, "# Example\n\n" + "A line of the readme that takes some room. " * 20 + "\n")


def only_session(workspace: Path) -> Path:
    (path,) = sorted((workspace.parent / "sessions").glob("*.jsonl"))
    return path


def is_summary_request(body: Any) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and str(messages[-1].get("content")).startswith(compaction.SUMMARY_INSTRUCTION)


class LongTaskModel:
    """Calls ``read`` until it has been answered ``turns`` times in all (across continuations), then answers.

    Summary requests (the compaction's) get a summary; the count lives here, as a provider's would not.
    """

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.tool_turns = 0
        self.summaries = 0

    def __call__(self, body: Any) -> Reply:
        usage = counted(body)
        if is_summary_request(body):
            self.summaries += 1
            text = f"Summary {self.summaries}: the agent has read README.md {self.tool_turns} times so far."
            return replies.answer(text, usage=usage)
        if self.tool_turns >= self.turns:
            return replies.answer("Finished: the README says what the project does.", usage=usage)
        self.tool_turns += 1
        return replies.calls(("read", json.dumps({"path": "README.md"})), ids=[f"call_{self.tool_turns}"], usage=usage)


def counted(body: Any) -> dict[str, int]:
    """Usage as a provider would count the request: a token every four bytes of its JSON."""
    return {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": 10}


def run(capsys, server: LoopbackServer, *flags: str, prompt: str = "Read the README many times.") -> tuple[int, str, str]:
    base = ["--base-url", server.base_url, "--model", "m", "--durability", "process", "--no-stream", "--retries", "0"]
    return call(capsys, "run", prompt, *base, *flags)


def test_the_compact_command_summarises_and_keeps_the_newest_messages(capsys, workspace: Path) -> None:
    script = [replies.read(), replies.answer("one"), replies.answer("two"), replies.answer("Summary of it all.")]
    with LoopbackServer([*script, replies.answer("Shorter.")]) as server:
        assert run(capsys, server, prompt="first")[0] == 0
        assert run(capsys, server, "--continue", prompt="second")[0] == 0
        path = only_session(workspace)
        flags = ("--base-url", server.base_url, "--model", "m", "--no-stream")
        code, _, err = call(capsys, "compact", str(path), "--keep-tokens", "7", *flags)
        assert code == 0, err
        first_state = read_journal(path)
        assert call(capsys, "compact", str(path), "--keep-tokens", "0", *flags)[0] == 0, "and again, keeping nothing"
    assert "compacted" in err
    summary_request = server.requests[-1].body
    assert summary_request["messages"][0]["content"] == compaction.SUMMARY_PROMPT
    assert "tools" not in summary_request
    state = first_state
    assert state.lastCount is None, "the provider's count was of the context the compaction replaced"
    assert state.activeContext[0] == UserMessage(content="[Compacted history]\nSummary of it all.")
    assert [message.content for message in state.activeContext[1:]] == ["second", "two"]
    assert len(state.transcript) == 6, "the transcript keeps every message"
    assert verify(path).status == "ok"
    code, out, _ = call(capsys, "replay", str(path))
    assert "summary:" in out and "Summary of it all." in out
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert report["drift"] is False
    first, second = report["compactions"]
    assert (first["messagesBefore"], first["messagesAfter"], first["kept"], first["keptFrom"]) == (6, 3, 2, 5)
    assert (second["messagesBefore"], second["messagesAfter"], second["kept"], second["keptFrom"]) == (3, 1, 0, None)
    assert (first["pieces"], second["pieces"]) == (1, 1), "two compactions in a row are not pieces of one"
    out = call(capsys, "audit", str(path))[1]
    assert "characters and 2 kept from #5 (~" in out and "characters and none kept" in out and "piece" not in out


def test_a_long_tool_session_compacts_several_times_and_finishes(capsys, workspace: Path) -> None:
    model = LongTaskModel(turns=200)
    with LoopbackServer(model, validate=False) as server:
        code, out, err = run(capsys, server, "--context-window", "3000", "--max-steps", "400")
    assert code == 0, err
    assert out == "Finished: the README says what the project does.\n"
    assert model.summaries >= 3
    path = only_session(workspace)
    state = read_journal(path)
    assert type(state.operation) is IdleOperation
    assert transcript_violation(state.transcript) is None
    assert verify(path).status == "ok"
    text = path.read_text()
    assert text.count('"type":"compactionStarted"') == model.summaries
    assert text.count(compaction.CONTINUE_PROMPT) >= model.summaries - 1
    assert state.lastOutcome is not None and state.lastOutcome.outcome == "completed"


def test_the_long_session_reads_the_same_through_checkpoints_and_exports_to_v2(capsys, workspace: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Checkpoints on at every fold: the run's own reads leave them, and the replays below go through them.
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", "0")
    model = LongTaskModel(turns=200)
    with LoopbackServer(model, validate=False) as server:
        code, _, err = run(capsys, server, "--context-window", "3000", "--max-steps", "400")
    assert code == 0, err
    assert model.summaries >= 3
    path = only_session(workspace)
    full = b'{"ok":true,"state":' + read_journal(path).to_json_bytes() + b"}\n"
    for _ in range(2):
        code, out, err = call(capsys, "replay", str(path), "--json")
        assert (code, err) == (0, "")
        assert out.encode() == full
    assert list((workspace.parent / "sessions" / ".tiny-agent-checkpoints").glob("*.checkpoint"))
    exported = workspace.parent / "v2.jsonl"
    code, _, err = call(capsys, "export", str(path), "--v2", "-o", str(exported))
    assert code == 0, err
    assert exported.read_bytes().startswith(b'{"kind":"header","version":2,')
    assert read_journal(exported).transcript == read_journal(path).transcript
    # The next turn is written from a lean restore: the messages before the active context stay on disk.
    asked: list[int] = []
    monkeypatch.setattr(checkpoints._Older, "__call__", lambda older: asked.append(1) or [])
    monkeypatch.setenv("TINY_AGENT_CHECKPOINT_BYTES", str(1 << 30))
    with LoopbackServer(model, validate=False) as server:
        code, out, err = run(capsys, server, "--continue", "--context-window", "3000", prompt="And now?")
    assert (code, out, asked) == (0, "Finished: the README says what the project does.\n", []), err
    monkeypatch.undo()
    # A lean restore at any line of a compacted session, plus the rest, is the full fold.
    data = path.read_bytes()
    whole = Fold()
    expected = outcome(whole, data)
    assert capture(whole).older["entries"] > len(whole.state.entries) // 2
    cuts = [at + 1 for at in range(len(data)) if data[at] == 10]
    for cut in cuts[:: max(1, len(cuts) // 40)]:
        assert outcome(checkpointed(data, cut, lean=True), data[cut:]) == expected, f"cut at byte {cut}"


def test_a_context_length_error_compacts_and_retries_once(capsys, workspace: Path) -> None:
    too_long = Reply(status=400, body=json.dumps({"error": {"message": "This model's maximum context length is 8192 tokens",
                                                           "code": "context_length_exceeded"}}).encode())
    script = [replies.answer("one"), replies.answer("two"), too_long, replies.answer("Summary."), replies.answer("Third, at last.")]
    with LoopbackServer(script) as server:
        assert run(capsys, server, prompt="first")[0] == 0
        assert run(capsys, server, "--continue", prompt="second")[0] == 0
        code, out, err = run(capsys, server, "--continue", prompt="third")
    assert code == 0, err
    assert out == "Third, at last.\n"
    path = only_session(workspace)
    text = path.read_text()
    assert '"code":"context_length_exceeded"' in text
    assert text.count('"type":"compactionStarted"') == 1
    assert verify(path).status == "ok"


POINTS = ["compaction-started", "step-attempt", "raw", "compaction", "finish"]


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_point_of_a_compaction_is_recovered(workspace: Path, point: str) -> None:
    """First run: one answer.  Then `compact`, killed at ``point``; `resume` finishes the compaction."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_FAILPOINT")}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    script = [replies.answer("one"), replies.answer("two"), replies.answer("The summary."), replies.answer("The summary.")]
    with LoopbackServer(script) as server:
        flags = ["--base-url", server.base_url, "--model", "m", "--no-stream"]
        for prompt in ("first", "second"):
            done = subprocess.run([sys.executable, "-m", "tiny_agent", "run", prompt, *flags, "--continue" if prompt == "second" else "--retries=0"],
                                  cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        path = only_session(workspace)
        killed = subprocess.run([sys.executable, "-m", "tiny_agent", "compact", str(path), "--keep-tokens", "7", *flags],
                                cwd=workspace, env={**env, "TINY_AGENT_FAILPOINT": f"after-commit:{point}"},
                                capture_output=True, text=True, timeout=60)
        assert killed.returncode == -9, killed.stderr
        resumed = subprocess.run([sys.executable, "-m", "tiny_agent", "resume", str(path), *flags],
                                 cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
        assert resumed.returncode == 0, resumed.stderr
    state = read_journal(path)
    assert type(state.operation) is IdleOperation
    assert state.lastOutcome is not None and state.lastOutcome.kind == "compaction"
    assert state.activeContext[0].content.startswith("[Compacted history]\n")
    assert verify(path).status == "ok"


# -- compaction that fits the window it serves (issue 26) ------------------------------------------------


class Summariser:
    """Answers a prompt with "answer" (after one read, with ``reads``) and a summary request with "Summary N",
    keeping every summary request's body."""

    def __init__(self, reads: bool = False) -> None:
        self.reads = reads
        self.bodies: list[Any] = []

    def __call__(self, body: Any) -> Reply:
        if is_summary_request(body):
            self.bodies.append(body)
            return replies.answer(f"Summary {len(self.bodies)}.", usage=counted(body))
        if self.reads and body["messages"][-1]["role"] == "user":
            return replies.calls(("read", json.dumps({"path": "README.md"})), ids=[f"call_{len(body['messages'])}"])
        return replies.answer("answer", usage=counted(body))


def history(capsys, server: LoopbackServer, turns: int, size: int = 800) -> Path:
    for turn in range(turns):
        prompt = f"Turn {turn}: " + "words to remember " * (size // 18)
        code, _, err = run(capsys, server, *(["--continue"] if turn else []), prompt=prompt)
        assert code == 0, err
    return only_session(Path.cwd())


def compact(capsys, server: LoopbackServer, path: Path, *flags: str) -> tuple[int, str, str]:
    base = ["--base-url", server.base_url, "--model", "m", "--durability", "process", "--no-stream", "--retries", "0"]
    return call(capsys, "compact", str(path), *base, *flags)


def test_a_history_larger_than_the_window_is_compacted_in_pieces_that_each_fit(capsys, workspace: Path) -> None:
    model = Summariser()
    with LoopbackServer(model, validate=False) as server:
        path = history(capsys, server, turns=8)
        code, _, err = compact(capsys, server, path, "--context-window", "1024", "--keep-tokens", "50")
    assert code == 0, err
    assert err.count("compacting a piece") == len(model.bodies) - 1 >= 2
    for body in model.bodies:
        assert body["max_tokens"] == 128, "the summary's cap: an eighth of the window"
        assert len(json.dumps(body)) // 4 + body["max_tokens"] <= 1024, "each summary request fits the window"
    for earlier, body in enumerate(model.bodies[1:], start=1):
        assert body["messages"][1]["content"] == f"[Compacted history]\nSummary {earlier}.", "each summary folds the last"
    state = read_journal(path)
    assert state.activeContext[0].content == f"[Compacted history]\nSummary {len(model.bodies)}."
    assert [message.content for message in state.activeContext[1:]] == ["answer"], "the tail within 50 tokens"
    assert path.read_text().count('"type":"compactionStarted"') == len(model.bodies)
    assert verify(path).status == "ok"
    pieces = len(model.bodies)
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert [(item["piece"], item["pieces"]) for item in report["compactions"]] == [(n, pieces) for n in range(1, pieces + 1)]
    first, last = report["compactions"][0], report["compactions"][-1]
    assert first["beforeCounted"] and first["tokensBefore"] > 1024, "the provider's count of the context it overflowed"
    assert (last["kept"], last["messagesAfter"]) == (1, 2)
    code, out, _ = call(capsys, "audit", str(path))
    assert f"piece 1 of {pieces}  16 messages ({first['tokensBefore']:,} tokens, reported) → " in out
    assert f"piece {pieces} of {pieces}" in out and "and 1 kept from #16 (~" in out
    exported = workspace.parent / "v2.jsonl"
    code, _, err = call(capsys, "export", str(path), "--v2", "-o", str(exported))
    assert code == 0 and f"the piece numbers of {pieces} compaction(s)" in err, err
    assert b'"piece"' not in exported.read_bytes() and verify(exported).status == "unsealed"
    html = session_page(build_view(path, handle="", prices={}))
    assert f"Piece 1 of {pieces}: the history did not fit one summary request." in html
    assert f"Context before: {first['tokensBefore']:,} tokens, reported; after: ~" in html


def test_the_kept_tail_is_a_token_budget_cut_at_a_turn_boundary(capsys, workspace: Path) -> None:
    model = Summariser(reads=True)
    with LoopbackServer(model, validate=False) as server:
        path = history(capsys, server, turns=2, size=40)
        transcript = read_journal(path).transcript
        assert [type(message).__name__ for message in transcript[-4:]] == ["UserMessage", "AssistantMessage", "ToolMessage", "AssistantMessage"]
        budget = compaction.size(transcript[-2:]) // 4 + 1  # the tool result and the answer fit, not with the call
        code, _, err = compact(capsys, server, path, "--keep-tokens", str(budget))
    assert code == 0, err
    state = read_journal(path)
    kept = state.activeContext[1:]
    assert compaction.size(kept) // 4 <= budget
    assert [message.content for message in kept] == ["answer"], "not the tool result without its call"
    assert transcript_violation(kept) is None


def test_long_tool_results_are_elided_in_the_summary_request_only(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = "".join(f"line {number} of a long file\n" for number in range(2000))
    isolated_workspace(tmp_path, monkeypatch, readme)
    model = Summariser(reads=True)
    with LoopbackServer(model, validate=False) as server:
        path = history(capsys, server, turns=1, size=40)
        code, _, err = compact(capsys, server, path, "--context-window", "16384", "--keep-tokens", "0")
    assert code == 0, err
    (body,) = model.bodies
    (result,) = [message["content"] for message in body["messages"] if message["role"] == "tool"]
    assert "characters of this tool result elided by tiny-agent for the summary" in result
    assert result.startswith("line 0 of") and result.rstrip().endswith("line 1999 of a long file")
    assert len(result) < len(readme) // 3
    transcript = read_journal(path).transcript
    assert any(message.content == readme for message in transcript if message.content), "the journal keeps it whole"


def test_a_refusal_is_no_summary(capsys, workspace: Path) -> None:
    refusal = Reply(body=replies.body({"role": "assistant", "content": None, "refusal": "I can't summarise that."}))
    with LoopbackServer([replies.answer("one"), replies.answer("two"), refusal]) as server:
        assert run(capsys, server, prompt="first")[0] == 0
        assert run(capsys, server, "--continue", prompt="second")[0] == 0
        path = only_session(workspace)
        code, _, err = call(capsys, "compact", str(path), "--keep-tokens", "0", "--base-url", server.base_url, "--model", "m")
    assert code == 1 and "the model declined to summarise (a refusal)" in err
    assert read_journal(path).activeContext[0] == UserMessage(content="first"), "nothing was compacted"
    assert json.loads(call(capsys, "audit", str(path), "--json")[1])["drift"] is False


def test_compact_takes_guidance_for_the_summary(capsys, workspace: Path) -> None:
    model = Summariser()
    with LoopbackServer(model, validate=False) as server:
        path = history(capsys, server, turns=2, size=40)
        code, _, err = compact(capsys, server, path, "Keep every number.", "--keep-tokens", "0")
        assert code == 0, err
        code, _, err = compact(capsys, server, path)
    assert (code, len(model.bodies)) == (0, 1) and "nothing to compact: the context has no turn to summarise" in err
    (body,) = model.bodies
    assert body["messages"][-1]["content"] == f"{compaction.SUMMARY_INSTRUCTION}\n\nKeep every number."


def test_no_auto_compact_never_compacts_and_auto_compaction_says_so_first(capsys, workspace: Path) -> None:
    model = LongTaskModel(turns=40)
    with LoopbackServer(model, validate=False) as server:
        code, _, err = run(capsys, server, "--context-window", "3000", "--max-steps", "400", "--no-auto-compact")
        assert code == 0, err
        assert model.summaries == 0 and "compacting" not in err
        path = only_session(workspace)
        assert '"compactionStarted"' not in path.read_text()
        model.turns = 80
        code, _, err = run(capsys, server, "--context-window", "3000", "--max-steps", "400", "--continue", prompt="Again.")
    assert code == 0, err
    assert model.summaries >= 1
    assert err.index("compacting first: the context is ~") < err.index("compacting: ")
    assert "(--no-auto-compact turns this off)" in err


def test_a_new_process_estimates_from_the_journals_last_count(capsys, workspace: Path) -> None:
    counted = {"prompt_tokens": 7000, "completion_tokens": 100}
    script = [replies.answer("one", usage=counted), replies.answer("Summary."), replies.answer("two")]
    with LoopbackServer(script) as server:
        assert run(capsys, server, "--context-window", "8192", prompt="first")[0] == 0
        state = read_journal(only_session(workspace))
        assert state.lastCount == (7100, 2, 2)
        code, _, err = run(capsys, server, "--context-window", "8192", "--continue", prompt="second")
    assert code == 0, err
    assert "compacting first: the context is ~7,102 tokens of the model's 8,192-token window" in err


def test_a_context_that_overflows_again_after_compacting_says_what_is_left_and_fails(capsys, workspace: Path) -> None:
    too_long = Reply(status=400, body=json.dumps({"error": {"message": "This model's maximum context length is 8192 tokens",
                                                           "code": "context_length_exceeded"}}).encode())
    with LoopbackServer([replies.answer("one"), too_long, replies.answer("Summary."), too_long]) as server:
        assert run(capsys, server, prompt="first")[0] == 0
        code, _, err = run(capsys, server, "--continue", prompt="second")
        assert server.request_count == 4, "one compaction, one retry, then no more"
    assert code == 1
    assert "still too long after compacting: the summary with the system prompt" in err
    assert err.strip().splitlines()[-1].startswith("FAILED: ")
    assert only_session(workspace).read_text().count('"type":"compactionStarted"') == 1


def test_no_auto_compact_leaves_a_context_length_error_a_failure(capsys, workspace: Path) -> None:
    too_long = Reply(status=400, body=json.dumps({"error": {"message": "This model's maximum context length is 8192 tokens",
                                                           "code": "context_length_exceeded"}}).encode())
    with LoopbackServer([replies.answer("one"), too_long]) as server:
        assert run(capsys, server, prompt="first")[0] == 0
        code, _, err = run(capsys, server, "--continue", "--no-auto-compact", prompt="second")
        assert server.request_count == 2
    assert code == 1
    assert "not compacting: --no-auto-compact" in err
    assert '"compactionStarted"' not in only_session(workspace).read_text()


def test_estimates_start_from_the_providers_count_and_learn_from_context_errors() -> None:
    from tiny_agent.journal.state import Header, IdleOperation, SessionState
    from tiny_agent.journal.transcript import AssistantMessage, Usage

    header = Header(id="s", createdAt=0, cwd="/", provider="p", model="m", environmentIdentity="e")
    messages = [UserMessage(content="x" * 400), AssistantMessage(content="y" * 40)]
    state = SessionState(header, 3, list(messages), list(messages), Usage(), IdleOperation(), 0)
    sizing = compaction.Sizing(None)
    assert sizing.tokens(state, 600) == (600 + 408 + 48) // 4, "before any count: characters at four a token"
    sizing.sent = 1000
    sizing.settled(Usage(input=400, output=20, cacheRead=100), None)
    assert sizing.chars_per_token == 2.0
    state.lastCount = (520, 2, 2)  # what the fold keeps of the answer's usage
    assert sizing.tokens(state, 600) == 520, "the provider's count (prompt and answer) while nothing was added"
    state.transcript.append(UserMessage(content="z" * 92))
    state.activeContext.append(state.transcript[-1])
    assert sizing.tokens(state, 600) == 520 + 50, "plus what was added since, at the ratio observed"
    sizing.sent = 3000
    assert sizing.learn("HTTP 400: request (3000 tokens) exceeds the available context size (2048 tokens), try increasing it")
    assert (sizing.window, sizing.chars_per_token) == (2048, 1.0)
    assert not sizing.learn("HTTP 400: This model's maximum context length is 4096 tokens"), "a larger window teaches nothing"


STATED = {
    "anthropic-input-and-max-tokens-exceed": (188240, 200000),
    "anthropic-prompt-too-long": (208317, 200000),
    "deepseek-context-length": (131820, 131072),
    "groq-context-length-exceeded": (None, None),
    "llama-cpp-python-context-length-exceeded": (2701, 2048),
    "llamacpp-exceed-context-size": (2696, 256),
    "mistral-context-length": (40466, 32768),
    "openai-chat-context-length-exceeded": (131410, 128000),
    "openrouter-context-length": (132039, 131072),
    "openrouter-upstream-context-error": (204528, 200000),
    "vllm-context-length-wrapped": (33021, 32768),
    "vllm-max-tokens-too-large": (30112, 32768),
}


@pytest.mark.parametrize("name", sorted(STATED))
def test_the_sizes_a_context_length_error_states(name: str) -> None:
    text = (PROJECT_ROOT / "fixtures" / "wire" / "context-errors" / f"{name}.json").read_text()
    assert compaction.stated_sizes(text.replace('\\"', '"')) == STATED[name]
