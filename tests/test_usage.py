"""Usage that adds up (issues 24 item 3, 27 item 3): not reported is not zero, reasoning tokens, cache writes.

Recorded bodies (fixtures/wire/usage/, fixtures/wire/llamacpp/) read through ``normalize`` and through full runs
against a loopback server that sends them as they were recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from builders import RunWriter, new_writer
from conftest import PROJECT_ROOT
from test_replay_cli import call
from test_wire_e2e import only_session, run, workspace  # noqa: F401 (a fixture)

from tiny_agent.errors import CorruptionError
from tiny_agent.fold import Fold, reduce_chunks
from tiny_agent.journal.facts import UsageFact
from tiny_agent.journal.transcript import Usage
from tiny_agent.loopback import LoopbackServer, Reply
from tiny_agent.stores.journal import CommitRejected, read_journal

pytest_plugins = ["llama_server"]

WIRE = PROJECT_ROOT / "fixtures" / "wire"
SSE = "text/event-stream"

# fixture, how normalize reads it, the ledger's usage (fixtures/wire/usage/README.md)
CORPUS = [
    ("usage/xai-grok-reasoning-excluded.json", ["--provider", "xai"], Usage(73, 222, 640, 0, 196)),
    ("usage/xai-grok-reasoning-excluded.sse", ["--provider", "xai"], Usage(73, 222, 640, 0, 196)),
    ("usage/openai-o4-mini-reasoning-included.json", ["--provider", "openai"], Usage(93, 1371, 1024, 0, 1344)),
    ("usage/openai-o4-mini-reasoning-included.sse", ["--provider", "openai"], Usage(93, 1210, 1024, 0, 1195)),
    ("usage/responses-reasoning-tokens.json", ["--api", "responses"], Usage(512, 734, 1536, 0, 704)),
    ("usage/responses-cache-write-openrouter.json", ["--api", "responses"], Usage(37, 212, 18432, 5841, 0)),
    ("usage/responses-cache-write-openrouter.sse", ["--api", "responses"], Usage(37, 15, 18432, 6010, 0)),
    ("usage/anthropic-cache-creation-ttl.json", ["--api", "anthropic"], Usage(14, 187, 20480, 5632)),
    ("usage/anthropic-cache-creation-ttl.sse", ["--api", "anthropic"], Usage(14, 12, 20480, 5632)),
    ("xai-reasoning.json", ["--provider", "xai"], Usage(26, 103, 6, 0, 94)),
    ("llamacpp/stream-include-usage.sse", ["--provider", "llamacpp"], Usage(1, 14, 57, 0)),
    ("llamacpp/stream.sse", ["--provider", "llamacpp"], None),
    ("llamacpp-python/stream-include-usage.sse", ["--provider", "llama-cpp-python"], None),
]


@pytest.mark.parametrize(("fixture", "how", "usage"), CORPUS, ids=[case[0] for case in CORPUS])
def test_each_recorded_body_gives_the_usage_that_was_billed(capsys, fixture: str, how: list[str], usage: Usage | None) -> None:
    code, out, err = call(capsys, "normalize", *how, str(WIRE / fixture))
    assert code == 0, err
    shown = json.loads(out)
    assert shown["usage"] == msgspec.to_builtins(usage)


def test_the_xai_profile_says_how_its_output_was_counted(capsys) -> None:
    body = str(WIRE / "usage" / "xai-grok-reasoning-excluded.json")
    adapted = json.loads(call(capsys, "normalize", "--provider", "xai", body)[1])["adapted"]
    assert adapted == [
        {
            "adapter": "reasoning-apart-from-output@1",
            "path": "usage.completion_tokens",
            "kind": "replaced",
            "detail": "26 + reasoning_tokens 196 = 222 (the provider counts reasoning apart from it)",
        }
    ]
    bare = json.loads(call(capsys, "normalize", body)[1])["usage"]
    assert (bare["output"], bare["reasoning"]) == (26, 196)  # without the profile: what the body says


def test_the_llamacpp_profile_asks_for_stream_usage_and_gets_it(capsys, workspace: Path) -> None:  # noqa: F811
    body = (WIRE / "llamacpp" / "stream-include-usage.sse").read_bytes()
    with LoopbackServer([Reply(body=body, content_type=SSE)]) as server:
        code, _, err = run(capsys, server, "--provider", "llamacpp", "--stream")
        sent = server.requests[0].body
    assert code == 0, err
    assert sent["stream_options"] == {"include_usage": True}
    assert read_journal(only_session(workspace)).usage == Usage(1, 14, 57, 0)


def test_usage_not_reported_is_written_nowhere_and_shown_as_na(capsys, workspace: Path) -> None:  # noqa: F811
    body = (WIRE / "llamacpp" / "stream.sse").read_bytes()
    with LoopbackServer([Reply(body=body, content_type=SSE)]) as server:
        code, _, err = run(capsys, server, "--provider", "llamacpp", "--stream")
    assert code == 0, err
    path = only_session(workspace)
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert not [fact for line in lines for fact in line if fact["kind"] == "usage"], "no usage fact, not a zero one"
    assert "usage: n/a (no response reported usage)" in call(capsys, "replay", str(path))[1]
    audit = call(capsys, "audit", str(path))[1]
    assert "usage     no usage reported: n/a" in audit and "prompt_tokens 0" not in audit
    assert "verdict: no drift" in audit
    attempt = json.loads(call(capsys, "audit", str(path), "--json")[1])["attempts"][0]
    assert attempt["usage"] is None
    page = workspace / "page.html"
    assert call(capsys, "view", str(path), "-o", str(page))[0] == 0
    html = page.read_text()
    assert "n/a (not reported)" in html and "$0 from your prices" not in html
    report = call(capsys, "report")[1]
    assert "usage not reported by 1 model attempt: n/a, in no token column and no cost" in report


def test_xai_reasoning_is_ledgered_and_left_out_of_a_v2_export(capsys, workspace: Path) -> None:  # noqa: F811
    body = (WIRE / "usage" / "xai-grok-reasoning-excluded.json").read_bytes()
    with LoopbackServer([Reply(body=body)]) as server:
        code, _, err = run(capsys, server, "--provider", "xai", "--no-stream")
    assert code == 0, err
    path = only_session(workspace)
    assert read_journal(path).usage == Usage(73, 222, 640, 0, 196)
    assert "output 222 (reasoning 196)" in call(capsys, "replay", str(path))[1]
    audit = call(capsys, "audit", str(path))[1]
    assert "adapted   reasoning-apart-from-output@1: usage.completion_tokens: 26 + reasoning_tokens 196 = 222" in audit
    assert "reasoning_tokens 196 = reasoning 196 (part of output)" in audit
    target = workspace / "v2.jsonl"
    code, _, err = call(capsys, "export", "--v2", str(path), "-o", str(target))
    assert code == 0, err
    assert "the reasoning counter of 1 usage fact(s)" in err
    assert read_journal(target).usage == Usage(73, 222, 640, 0)


def _journal_with_usage(path: Path, version: int, usage: Usage) -> bytes:
    writer = RunWriter(new_writer(path, version))
    writer.start("hi")
    writer.attempt()
    writer.writer.commit([UsageFact(id="", operationId=writer.operation_id, attemptId=writer.attempt_id, usage=usage)])
    return path.read_bytes()


@pytest.mark.parametrize("fast_path", [True, False])
def test_reasoning_is_a_v3_member_of_usage(tmp_path: Path, fast_path: bool) -> None:
    data = _journal_with_usage(tmp_path / "v3.jsonl", 3, Usage(5, 9, 0, 0, 4))
    state = reduce_chunks((data,), Fold(fast_path=fast_path))
    assert state.usage == Usage(5, 9, 0, 0, 4)
    assert state.to_json()["usage"] == {"input": 5, "output": 9, "cacheRead": 0, "cacheWrite": 0, "reasoning": 4}
    v2 = _journal_with_usage(tmp_path / "v2.jsonl", 2, Usage(5, 9)).replace(b'"cacheWrite":0}', b'"cacheWrite":0,"reasoning":4}')
    with pytest.raises(CorruptionError, match='usage has unknown key "reasoning"'):
        reduce_chunks((v2,), Fold(fast_path=fast_path))
    with pytest.raises(CommitRejected, match='usage has unknown key "reasoning"'):
        _journal_with_usage(tmp_path / "v2-writer.jsonl", 2, Usage(5, 9, 0, 0, 4))
    unreported = Usage(5, 9) + Usage(1, 1)
    assert unreported.reasoning == Usage().reasoning and (unreported + Usage(0, 0, 0, 0, 3)).reasoning == 3


def test_a_real_llama_server_streams_usage_to_the_llamacpp_profile(capsys, workspace: Path, llama) -> None:  # noqa: F811
    flags = ["--provider", "llamacpp", "--base-url", llama.api_url, "--stream", "--max-tokens", "8", "--durability", "process"]
    code, _, err = call(capsys, "run", "hello", *flags)
    assert code in (0, 1), err  # a random-weight model may be cut off at 8 tokens: still an answer, still usage
    usage = read_journal(only_session(workspace)).usage
    assert usage.prompt_total > 0 and usage.output > 0, "llama-server sent usage because the profile asked for it"
