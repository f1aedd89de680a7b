"""Real providers, end to end over loopback HTTP: profiles and quirk adapters in a full run, keys that
go only where they belong (checked on captured headers), retries, streaming byte for byte, the
Anthropic and Responses APIs in multi-turn tool sessions, and crash-and-resume for each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import replies
from conftest import PROJECT_ROOT
from test_replay_cli import call
from wire_apis import fixture_files

from tiny_agent.fold.transcript_rules import transcript_violation
from tiny_agent.journal.state import IdleOperation
from tiny_agent.loopback import Answer, Call, LoopbackServer, Reply, StreamShape
from tiny_agent.loopback.capture import fingerprint
from tiny_agent.oversight.verify import verify
from tiny_agent.stores.journal import raw_facts, read_journal

WIRE = PROJECT_ROOT / "fixtures" / "wire"
KEY_VARIABLES = (
    "TINY_AGENT_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "AZURE_OPENAI_API_KEY",
)


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "README.md").write_text("# Example\n\nA project that prints hi.\n")
    monkeypatch.chdir(root)
    for name in (*KEY_VARIABLES, "TINY_AGENT_BASE_URL", "TINY_AGENT_MODEL", "TINY_AGENT_PROVIDER", "TINY_AGENT_FAILPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TINY_AGENT_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("TINY_AGENT_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path))
    return root


def sessions_of(workspace: Path) -> list[Path]:
    return sorted((workspace.parent / "sessions").glob("*.jsonl"))


def only_session(workspace: Path) -> Path:
    (path,) = sessions_of(workspace)
    return path


def assert_sound(path: Path) -> None:
    """Idle, provider-valid, and every byte accounted for."""
    state = read_journal(path)
    assert type(state.operation) is IdleOperation
    assert transcript_violation(state.transcript) is None
    assert verify(path).status == "ok", verify(path).detail


def run(capsys, server: LoopbackServer, *flags: str, prompt: str = "What is this project?") -> tuple[int, str, str]:
    base = ["--base-url", server.base_url, "--model", "test/model", "--durability", "process", "--retry-wait", "0.01"]
    return call(capsys, "run", prompt, *base, *flags)


# -- issue 9: the six quirk bodies under their profiles, in a full run ---------------------------

QUIRKY = [
    ("vllm-empty-tool-calls", "vllm"),
    ("groq-no-content-key", "groq"),
    ("azure-no-content-key", "azure"),
    ("mistral-content-list", "mistral"),
    ("mistral-tool-call-no-type", "mistral"),
    ("llamacpp-object-arguments", "llamacpp"),
]


@pytest.mark.parametrize(("fixture", "provider"), QUIRKY)
def test_a_quirky_provider_works_under_its_profile(capsys, workspace: Path, fixture: str, provider: str) -> None:
    body = (WIRE / f"{fixture}.json").read_bytes()
    script = [Reply(body=body), replies.answer("It prints hi.")]
    with LoopbackServer(script) as server:
        code, out, err = run(capsys, server, "--provider", provider, "--no-stream")
    assert code == 0, err
    path = only_session(workspace)
    assert_sound(path)
    ((_, first), *_) = list(raw_facts(path))
    assert first.raw.body == body.decode("utf-8"), "the raw fact keeps the body exactly as received"
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    adapted = report["attempts"][0]["response"]["adapted"]
    assert adapted, "audit shows which adapter changed what"
    assert report["drift"] is False


@pytest.mark.parametrize(("fixture", "provider"), QUIRKY)
def test_without_the_profile_a_quirky_body_is_still_rejected(capsys, workspace: Path, fixture: str, provider: str) -> None:
    body = (WIRE / f"{fixture}.json").read_bytes()
    with LoopbackServer([Reply(body=body)]) as server:
        code, _, err = run(capsys, server, "--provider", "custom", "--no-stream", "--retries", "0")
    assert code == 1
    assert "FAILED:" in err


# -- issue 9: keys go only where they belong ----------------------------------------------------


def test_a_profiles_own_key_never_reaches_another_host(capsys, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-0123456789abcdefghij")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-0123456789abcdefghijklmn")
    with LoopbackServer([replies.answer("one"), replies.answer("two")]) as server:
        assert run(capsys, server, "--provider", "openai", "--no-stream")[0] == 0
        assert run(capsys, server, "--provider", "openrouter", "--no-stream")[0] == 0
    assert [request.authorized for request in server.requests] == [False, False]


def test_the_explicit_key_goes_to_the_url_given(capsys, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-explicit-0123456789abcdefghij"
    monkeypatch.setenv("TINY_AGENT_API_KEY", key)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-0123456789abcdefghij")
    with LoopbackServer([replies.answer("one")]) as server:
        assert run(capsys, server, "--no-stream")[0] == 0
    (request,) = server.requests
    assert request.fingerprints == {"authorization": fingerprint(key)}
    for file in workspace.parent.rglob("*"):
        if file.is_file():
            assert key.encode() not in file.read_bytes(), file


def test_openai_key_alone_is_never_sent_to_openrouter(workspace: Path) -> None:
    from tiny_agent.providers.selection import Requested, select_endpoint

    endpoint = select_endpoint(Requested(model="m"), {"OPENAI_API_KEY": "sk-openai-0123456789abcdefghij"}, None)
    assert endpoint.name == "openai"
    assert endpoint.host == "api.openai.com"


def test_a_remote_url_without_a_key_for_it_is_a_config_error(capsys, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-0123456789abcdefghij")
    code, _, err = call(capsys, "run", "hi", "--base-url", "https://example.invalid/v1", "--model", "m")
    assert code == 2
    assert err.startswith("CONFIG:")
    assert "TINY_AGENT_API_KEY" in err
    assert not sessions_of(workspace), "nothing is created before the configuration is settled"


# -- issue 9: retries, timeouts, the step limit ----------------------------------------------------


def test_a_rate_limit_with_retry_after_then_success(capsys, workspace: Path) -> None:
    script = [replies.failure("chat", 429, "slow down", retry_after="1"), replies.answer("Done.")]
    with LoopbackServer(script) as server:
        code, out, err = run(capsys, server, "--no-stream")
    assert (code, out) == (0, "Done.\n")
    assert "HTTP 429" in err and "waiting 1.0 s before attempt 2 of 3" in err
    path = only_session(workspace)
    assert [fact.raw.status for _, fact in raw_facts(path)] == [429, 200]
    assert_sound(path)


def test_503_three_times_exhausts_the_attempts(capsys, workspace: Path) -> None:
    script = [replies.failure("chat", 503), replies.failure("chat", 503), replies.failure("chat", 503)]
    with LoopbackServer(script) as server:
        code, _, err = run(capsys, server, "--no-stream", "--retries", "2")
    assert code == 1
    assert server.request_count == 3
    assert "HTTP 503" in err
    assert "attempts" in err
    path = only_session(workspace)
    assert [fact.raw.status for _, fact in raw_facts(path)] == [503, 503, 503]
    assert '"code":"http_error"' in path.read_text()
    assert_sound(path)
    (row,) = json.loads(call(capsys, "sessions", "--json")[1])
    assert row["status"] == "failed"
    assert "HTTP 503" in row["reason"]
    code, out, _ = call(capsys, "replay", str(path))
    assert "last run: failed: http_error: HTTP 503" in out


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b"Service Unavailable\n", "HTTP 503: Service Unavailable (the body is not JSON)"),
        (b"<html>\n  <title>503</title>\n" + b"x" * 300, "HTTP 503: <html> <title>503</title> " + "x" * 134 + "… (the body is not JSON)"),
        (b"", "HTTP 503: an empty body"),
    ],
    ids=["text", "html", "empty"],
)
def test_an_error_body_that_is_not_json_is_shown_by_its_start(capsys, workspace: Path, body: bytes, shown: str) -> None:
    reply = Reply(status=503, body=body, content_type="text/plain")
    with LoopbackServer([reply]) as server:
        code, _, err = run(capsys, server, "--no-stream", "--retries", "0")
    assert code == 1
    assert f"FAILED: {shown} (attempts exhausted: 1 of 1)" in err
    path = only_session(workspace)
    code, out, _ = call(capsys, "replay", str(path))
    assert f"last run: failed: http_error: {shown[:80]}" in out, "replay clips a long reason, never its start"
    assert_sound(path)


def test_a_client_error_is_not_retried_and_its_body_is_shown(capsys, workspace: Path) -> None:
    with LoopbackServer([replies.failure("chat", 400, "model not found: nope")]) as server:
        code, _, err = run(capsys, server, "--no-stream")
    assert code == 1
    assert server.request_count == 1
    assert "model not found: nope" in err


def test_a_timeout_names_the_limit_and_how_to_raise_it(capsys, workspace: Path) -> None:
    with LoopbackServer([Reply(body=b"{}", delay=3)]) as server:
        code, _, err = run(capsys, server, "--no-stream", "--retries", "0", "--read-timeout", "0.5")
    assert code == 1
    assert "no response bytes for 0.5 s" in err and "--read-timeout" in err


def test_an_endless_tool_caller_is_stopped_by_the_step_limit(capsys, workspace: Path) -> None:
    from tiny_agent.loopback import EndlessToolCaller

    with LoopbackServer(EndlessToolCaller("chat")) as server:
        code, _, err = run(capsys, server, "--no-stream", "--max-steps", "4")
    assert code == 1
    assert err.splitlines()[-1].startswith("STEP_LIMIT:")
    assert server.request_count == 4
    path = only_session(workspace)
    assert_sound(path)
    assert '"code":"step_limit"' in path.read_text()
    code, out, _ = call(capsys, "replay", str(path))
    assert "stopped at the step limit" in out
    (row,) = json.loads(call(capsys, "sessions", "--json")[1])
    assert row["status"] == "step-limit"


# -- issue 10: streaming, byte for byte ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_streamed_run_journals_exactly_the_bytes_sent(capsys, workspace: Path, seed: int) -> None:
    shape = StreamShape(keep_alives=True, usage_chunk=True)
    script = [replies.stream("chat", replies.one_call(), seed=seed, shape=shape), replies.stream("chat", replies.text_answer(), seed=seed)]
    with LoopbackServer(script) as server:
        code, out, err = run(capsys, server, "--provider", "openai", "--stream")
    assert code == 0, err
    assert out == replies.text_answer().text + "\n"
    path = only_session(workspace)
    bodies = [fact.raw.body.encode("utf-8") for _, fact in raw_facts(path)]
    assert bodies == [sent.body for sent in server.sent]
    assert server.requests[0].body["stream"] is True
    assert server.requests[0].body["stream_options"] == {"include_usage": True}
    assert_sound(path)
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert report["drift"] is False
    assert report["attempts"][0]["response"]["stream"]["events"] > 3


def test_a_stream_cut_off_is_journaled_and_fails_the_step(capsys, workspace: Path) -> None:
    cut = replies.stream("chat", replies.text_answer(), seed=4, break_off_after=60)
    with LoopbackServer([cut]) as server:
        code, _, err = run(capsys, server, "--stream", "--retries", "0")
    assert code == 1
    path = only_session(workspace)
    ((_, raw),) = list(raw_facts(path))
    assert raw.raw.body.encode() == server.sent[0].body
    assert raw.raw.incomplete
    assert '"code":"incomplete_response"' in path.read_text()
    assert_sound(path)


# -- issue 11: Anthropic and Responses in multi-turn tool sessions ---------------------------------------


@pytest.mark.parametrize("api", ["anthropic", "responses"])
@pytest.mark.parametrize("streamed", [False, True])
def test_a_multi_turn_tool_session_over_each_api(capsys, workspace: Path, monkeypatch, api: str, streamed: bool) -> None:
    key = "sk-ant-test-0123456789abcdefghij" if api == "anthropic" else "sk-test-0123456789abcdefghijklmn"
    monkeypatch.setenv("TINY_AGENT_API_KEY", key)
    reply = replies.stream if streamed else replies.whole
    second = Answer(calls=(Call("read", '{"path":"README.md"}', id="call_9"),))
    script = [reply(api, replies.parallel_calls()), reply(api, second), reply(api, replies.text_answer())]
    provider = "anthropic" if api == "anthropic" else "openai-responses"
    with LoopbackServer(script) as server:
        code, out, err = run(capsys, server, "--provider", provider, "--stream" if streamed else "--no-stream")
    assert code == 0, err
    assert server.violations == []
    assert out == replies.text_answer().text + "\n"
    header = "x-api-key" if api == "anthropic" else "authorization"
    assert all(request.fingerprints == {header: fingerprint(key)} for request in server.requests)
    if api == "anthropic":
        assert all(request.headers.get("anthropic-version") for request in server.requests)
    else:
        assert all(request.body["store"] is False for request in server.requests)
    path = only_session(workspace)
    assert_sound(path)
    report = json.loads(call(capsys, "audit", str(path), "--json")[1])
    assert report["drift"] is False
    assert {attempt["response"]["api"] for attempt in report["attempts"]} == {api}


# -- crash and resume for each API -----------------------------------------------------------------------


def tiny(workspace: Path, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in KEY_VARIABLES}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["TINY_AGENT_API_KEY"] = "sk-test-0123456789abcdefghijklmn"
    if failpoint:
        env["TINY_AGENT_FAILPOINT"] = failpoint
    return subprocess.run([sys.executable, "-m", "tiny_agent", *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("api", "provider"), [("chat", "custom"), ("anthropic", "anthropic"), ("responses", "openai-responses")])
def test_killed_after_the_raw_commit_resume_settles_without_a_new_request(workspace: Path, api: str, provider: str) -> None:
    script = [replies.stream(api, replies.one_call(), seed=5), replies.stream(api, replies.text_answer(), seed=6)]
    with LoopbackServer(script) as server:
        flags = ["--provider", provider, "--base-url", server.base_url, "--model", "m", "--stream"]
        killed = tiny(workspace, "run", "What is this?", *flags, failpoint="after-commit:raw#1")
        assert killed.returncode == -9
        assert server.request_count == 1
        path = only_session(workspace)
        resumed = tiny(workspace, "resume", str(path), *flags)
        assert resumed.returncode == 0, resumed.stderr
        assert server.request_count == 2, "the stored response was settled, not asked for again"
    assert server.violations == []
    assert_sound(path)


def test_a_crash_between_two_attempts_then_resume(workspace: Path) -> None:
    script = [replies.failure("chat", 429, "slow down", retry_after="0"), replies.answer("Done.")]
    with LoopbackServer(script) as server:
        flags = ["--base-url", server.base_url, "--model", "m", "--no-stream", "--retry-wait", "0.01"]
        killed = tiny(workspace, "run", "hi", *flags, failpoint="after-commit:raw#1")
        assert killed.returncode == -9
        path = only_session(workspace)
        resumed = tiny(workspace, "resume", str(path), *flags)
        assert resumed.returncode == 0, resumed.stderr
    assert server.request_count == 2
    assert [fact.raw.status for _, fact in raw_facts(path)] == [429, 200]
    assert_sound(path)


# -- issue 27: refusals and hosted tools, from recorded bodies and streams, in full runs ---------------------

PROVIDERS = {"chat": "custom", "anthropic": "anthropic", "responses": "openai-responses"}


def recorded(path: Path) -> tuple[Reply, list[str]]:
    """A recorded fixture as the server's reply, and the flags that ask its API for it whole or streamed."""
    streamed = path.suffix == ".sse"
    reply = Reply(body=path.read_bytes(), content_type="text/event-stream" if streamed else "application/json")
    return reply, ["--provider", PROVIDERS[path.name.split("-")[0]], "--stream" if streamed else "--no-stream"]


@pytest.mark.parametrize("path", fixture_files(WIRE / "refusals"), ids=lambda path: path.name)
def test_a_refusal_is_the_visible_outcome_of_a_run(capsys, workspace: Path, monkeypatch, path: Path) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", "sk-ant-test-0123456789abcdefghij")
    expected = json.loads(path.with_name(path.name + ".expected.json").read_text())["stdout"]
    reply, flags = recorded(path)
    with LoopbackServer([reply, reply]) as server:
        code, out, err = run(capsys, server, *flags, "--json")
        assert code == 4, err
        assert err.splitlines()[-1].startswith("REFUSED: the model declined to answer")
        shown = json.loads(out)
        assert (shown["outcome"], shown["refused"], shown["final"]) == ("completed", True, expected["message"]["content"])
        session = shown["session"]
        # The refused turn is in the transcript; Anthropic is not sent it back (its documentation asks so).
        code, out, _ = run(capsys, server, *flags, "--session", session, prompt="Then explain the idea.")
        assert code == 4 and out == expected["message"]["content"] + "\n"
    second = server.requests[1].body
    sent = second["messages"] if "messages" in second else second["input"]
    assert (expected["message"]["content"] in json.dumps(sent)) == (not path.name.startswith("anthropic"))
    path_ = only_session(workspace)
    assert_sound(path_)
    assert '"stopReason":"refusal"' in path_.read_text()
    (row,) = json.loads(call(capsys, "sessions", "--json")[1])
    assert row["status"] == "refused" and row["reason"].startswith("refused: ")
    assert "→ refusal" in call(capsys, "replay", str(path_))[1]
    assert json.loads(call(capsys, "audit", str(path_), "--json")[1])["drift"] is False
    assert call(capsys, "view", str(path_), "-o", str(workspace / "view.html"))[0] == 0
    page = (workspace / "view.html").read_text()
    assert "(refused)" in page and "answered (refusal)" in page
    code, _, err = call(capsys, "export", "--v2", str(path_), "-o", str(workspace / "v2.jsonl"))
    assert code == 0 and "2 refusal(s), written as stop" in err
    v2 = (workspace / "v2.jsonl").read_text()
    assert '"stopReason":"refusal"' not in v2 and read_journal(workspace / "v2.jsonl").version == 2


def test_a_refusal_without_text_is_still_an_outcome_and_exports_as_a_failed_v2_run(capsys, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", "sk-ant-test-0123456789abcdefghij")
    reply = Reply(body=(WIRE / "anthropic" / "refusal.json").read_bytes())
    with LoopbackServer([reply]) as server:
        code, out, err = run(capsys, server, "--provider", "anthropic", "--no-stream")
    assert (code, out) == (4, "\n"), err
    source = only_session(workspace)
    assert_sound(source)
    code, _, err = call(capsys, "export", "--v2", str(source), "-o", str(workspace / "v2.jsonl"))
    assert code == 0 and "1 without text end their run failed (code refusal)" in err
    assert read_journal(workspace / "v2.jsonl").lastOutcome.errorCode == "refusal"


@pytest.mark.parametrize("path", fixture_files(WIRE / "hosted-tools"), ids=lambda path: path.name)
def test_hosted_tool_activity_is_kept_shown_and_never_run(capsys, workspace: Path, monkeypatch, path: Path) -> None:
    monkeypatch.setenv("TINY_AGENT_API_KEY", "sk-ant-test-0123456789abcdefghij")
    expected = json.loads(path.with_name(path.name + ".expected.json").read_text())
    reply, flags = recorded(path)
    api = path.name.split("-")[0]
    with LoopbackServer([reply, replies.whole(api, replies.text_answer())]) as server:
        code, out, err = run(capsys, server, *flags)
    source = only_session(workspace)
    assert_sound(source)
    if expected["exit"] == 65:
        assert code == 1 and expected["stdout"]["rejected"] in err
        return
    # An answer with no text at all (an image and nothing said) fails its step as any empty answer does.
    assert code == (1 if expected["stdout"]["message"]["content"] == "" else 0), err
    state = read_journal(source)
    calls = [call for message in state.transcript for call in getattr(message, "calls", [])]
    assert [call.function.name for call in calls] == (["read"] if "-then-" in path.name else [])
    assert server.request_count == (2 if calls else 1)
    assert "srvtoolu" not in json.dumps(server.requests[-1].body) and "web_search_call" not in json.dumps(server.requests[-1].body)
    audit = call(capsys, "audit", str(source))[1]
    for line in expected["stdout"]["hosted"]:
        assert f"  hosted    {line}" in audit
    code, _, _ = call(capsys, "view", str(source), "-o", str(workspace / "view.html"))
    assert code == 0 and "provider-side activity" in (workspace / "view.html").read_text()
