"""Context-length errors per provider (issue 24, item 2): one table (wire/context_errors.py), listed in
docs/provider.md, each row checked with the bodies recorded (or reproduced) in fixtures/wire/; near-misses
(a byte limit, a per-minute token budget, another invalid request) stay plain failures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import replies
from conftest import PROJECT_ROOT
from test_replay_cli import call
from test_wire_e2e import only_session, run, workspace  # noqa: F401 (a fixture)

from tiny_agent.agent.settlement import settlement
from tiny_agent.loopback import LoopbackServer, Reply, streamed
from tiny_agent.oversight.verify import verify
from tiny_agent.providers.http import raw_response
from tiny_agent.wire.context_errors import CONTEXT_ERRORS, context_error
from tiny_agent.wire.registry import adapter_identity

WIRE = PROJECT_ROOT / "fixtures" / "wire"
CORPUS = WIRE / "context-errors"

NOT_CONTEXT = {
    "anthropic-request-too-large-413-not-context",  # a byte limit of the request
    "groq-request-too-large-413-not-context",  # a per-minute token budget
    "openai-invalid-request-not-context",  # another invalid request, same status and type
    "ollama-openai-error-shape-not-context",  # a model that is not pulled
    "ollama-truncated-prompt-200",  # Ollama cuts the prompt silently and answers
    "anthropic-model-context-window-exceeded",  # a 200 answer that filled the window while generating
}

RECORDED_ELSEWHERE = [
    # (file, status, api): the fuller recordings of the native llama.cpp server and of llama-cpp-python
    ("llamacpp/context-overflow.json", 400, "chat"),
    ("llamacpp/stream-context-overflow.json", 400, "chat"),
    ("llamacpp-python/context-overflow.json", 400, "chat"),
]

PROVIDER_OF_META = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "llama.cpp": "llama.cpp",
    "llama-cpp-python": "llama-cpp-python",
    "vllm": "vLLM",
    "ollama": "Ollama",
    "mistral": "Mistral",
    "groq": "Groq",
    "openrouter": "OpenRouter",
    "deepseek": "OpenAI",  # DeepSeek sends OpenAI's wording
}


def corpus() -> list[str]:
    return sorted(path.name[: -len(".meta.json")] for path in CORPUS.glob("*.meta.json"))


def body_of(name: str) -> bytes:
    (path,) = [path for path in CORPUS.glob(f"{name}.*") if not path.name.endswith(".meta.json")]
    return path.read_bytes()


def failure_code(status: int, content_type: str | None, body: bytes, api: str) -> str | None:
    decided = settlement(raw_response(status, content_type, body), adapter_identity(api, ()))  # type: ignore[arg-type]
    return decided.failure[0] if decided.failure is not None else None


@pytest.mark.parametrize("name", corpus())
def test_each_providers_recorded_body_is_recognised_or_not(name: str) -> None:
    meta = json.loads((CORPUS / f"{name}.meta.json").read_text())
    code = failure_code(meta["status"], meta["contentType"], body_of(name), meta["api"])
    if name in NOT_CONTEXT:
        assert code != "context_length_exceeded", name
    else:
        assert code == "context_length_exceeded", name


@pytest.mark.parametrize(("file", "status", "api"), RECORDED_ELSEWHERE)
def test_the_llama_servers_own_recordings_are_context_errors(file: str, status: int, api: str) -> None:
    assert failure_code(status, "application/json", (WIRE / file).read_bytes(), api) == "context_length_exceeded"


def test_every_row_of_the_table_is_checked_with_a_recorded_body() -> None:
    matched: set[str] = set()
    for name in corpus():
        meta = json.loads((CORPUS / f"{name}.meta.json").read_text())
        body = body_of(name)
        try:
            value = json.loads(body)
        except ValueError:
            continue
        if name in NOT_CONTEXT:
            assert context_error(meta["status"], value) is None, name
            continue
        upstream = (value.get("error") or {}).get("metadata", {}).get("provider_name")
        provider = upstream or PROVIDER_OF_META[meta["provider"]]  # OpenRouter forwards the upstream's own error
        own = tuple(row for row in CONTEXT_ERRORS if row.provider == provider)
        assert context_error(meta["status"], value, table=own) is not None, f"{name}: {provider}'s own row says so"
        matched.add(provider)
    # Ollama sends no context error at all (it truncates): its row holds no code and no phrase.
    assert {row.provider for row in CONTEXT_ERRORS} - matched == {"Ollama"}
    (ollama,) = [row for row in CONTEXT_ERRORS if row.provider == "Ollama"]
    assert ollama.codes == ollama.phrases == ()


def test_openrouter_forwards_the_upstream_error_as_a_string_and_it_is_read() -> None:
    value = json.loads(body_of("openrouter-upstream-context-error"))
    assert "prompt is too long" not in value["error"]["message"]
    row = context_error(400, value)
    assert row is not None and row.provider == "Anthropic"


def test_a_body_that_is_not_json_is_read_as_text() -> None:
    assert context_error(400, None, "Error: This model's maximum context length is 4096 tokens") is not None
    assert context_error(400, None, "<html>400 Bad Request</html>") is None
    assert context_error(502, None, "maximum context length") is None


def test_odd_codes_never_break_the_reading() -> None:
    for code in (400, None, [1], {"a": 1}, True):
        assert context_error(400, {"error": {"code": code, "type": code, "message": "nothing"}}) is None
    assert context_error(400, {"error": {"code": "context_length_exceeded"}}) is None, "an error object has a message"
    assert context_error(400, {"error": {"metadata": {"raw": "{not json"}, "message": "Provider returned error"}}) is None


def docs_table() -> list[tuple[str, str, str, str]]:
    text = (PROJECT_ROOT / "docs" / "provider.md").read_text()
    section = text[text.index("## Context-length errors") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| ([^|`][^|]*?) \| ([^|]*?) \| ([^|]*?) \| ([^|]*?) \|", section, re.MULTILINE)
    return [row for row in rows if row[0] not in ("provider", "---")]


def test_docs_list_the_one_table() -> None:
    def shown(values: tuple[object, ...]) -> str:
        return ", ".join(f"`{value}`" for value in values) or "—"

    assert docs_table() == [(row.provider, shown(row.statuses), shown(row.codes), shown(row.phrases)) for row in CONTEXT_ERRORS]


# -- as a user meets them -----------------------------------------------------------------------


def test_llama_servers_recorded_overflow_compacts_and_the_run_goes_on(capsys, workspace: Path) -> None:  # noqa: F811
    # The recording came from a 256-token server, where no summary request fits (the next test): here it says 8192.
    recorded = (WIRE / "llamacpp" / "context-overflow.json").read_bytes()
    overflow = Reply(status=400, body=recorded.replace(b"(256 tokens)", b"(8192 tokens)").replace(b":256}", b":8192}"))
    script = [replies.answer("one"), overflow, replies.answer("Summary."), replies.answer("Two, after all.")]
    with LoopbackServer(script) as server:
        assert run(capsys, server, "--provider", "llamacpp", "--no-stream", prompt="first")[0] == 0
        code, out, err = run(capsys, server, "--provider", "llamacpp", "--no-stream", "--continue", prompt="second")
    assert code == 0, err
    assert out == "Two, after all.\n"
    path = only_session(workspace)
    text = path.read_text()
    assert '"code":"context_length_exceeded"' in text
    assert text.count('"type":"compactionStarted"') == 1
    assert verify(path).status == "ok"
    assert json.loads(call(capsys, "audit", str(path), "--json")[1])["drift"] is False


def test_a_window_too_small_for_any_summary_request_is_said_plainly(capsys, workspace: Path) -> None:  # noqa: F811
    overflow = Reply(status=400, body=(WIRE / "llamacpp" / "context-overflow.json").read_bytes())
    with LoopbackServer([replies.answer("one"), overflow]) as server:
        assert run(capsys, server, "--provider", "llamacpp", "--no-stream", prompt="first")[0] == 0
        code, _, err = run(capsys, server, "--provider", "llamacpp", "--no-stream", "--continue", prompt="second")
        assert server.request_count == 2, "no summary request that could not fit was sent"
    assert code == 1, err
    assert "FAILED: cannot compact: the summary request's own prompt does not fit the model's 256-token window" in err
    assert verify(only_session(workspace)).status == "ok"


def test_a_responses_stream_that_fails_for_context_compacts(capsys, workspace: Path) -> None:  # noqa: F811
    failed = streamed(body_of("openai-responses-context-length-exceeded-stream"), seed=2)
    script = [replies.whole("responses", replies.text_answer()), failed, replies.whole("responses", replies.text_answer())]
    script.append(replies.whole("responses", replies.text_answer()))
    with LoopbackServer(script) as server:
        flags = ("--provider", "custom", "--api", "responses", "--stream")
        assert run(capsys, server, *flags, prompt="first")[0] == 0
        code, _, err = run(capsys, server, *flags, "--continue", prompt="second")
    assert code == 0, err
    text = only_session(workspace).read_text()
    assert '"code":"context_length_exceeded"' in text
    assert text.count('"type":"compactionStarted"') == 1
