"""Sessions for the view and report tests, made by the real agent loop against the loopback server.

``story``: run 1 is retried (429, then 200) and calls a tool, then answers in
a stream; run 2 fails (HTTP 400); run 3 stops at the step limit.
``hostile``: the prompt, the model name, tool arguments and results, answers,
reasoning and error bodies all carry markup that would run if it were not
escaped (scripts, handlers, ``javascript:`` URLs, ``</style>``, ``</script>``
inside JSON, a remote image).

The tests at the end check the sessions are what the other tests assume.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import replies

from tiny_agent.cli import main
from tiny_agent.loopback import EndlessToolCaller, LoopbackServer, Reply, StreamShape
from tiny_agent.stores.journal import raw_facts, read_journal

PWNED = "window.__pwned = 1; document.title = 'pwned'"
HOSTILE = (
    f"<script>{PWNED}</script>"
    f'<img src=x onerror="{PWNED}">'
    '<a href="javascript:window.__pwned=1">click</a>'
    f"</style><style>body{{display:none}}</style>"
    f"</script><script>{PWNED}</script>"
    '<img src="http://127.0.0.1:9/beacon.png">'
    f'<svg onload="{PWNED}"></svg>'
)
"""Markup that runs, hides the page, or fetches something if it reaches the page unescaped."""
HOSTILE_MODEL = '<img src=x onerror="window.__pwned=1">'

ENV_CLEARED = (
    "TINY_AGENT_BASE_URL",
    "TINY_AGENT_MODEL",
    "TINY_AGENT_PROVIDER",
    "TINY_AGENT_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "TINY_AGENT_FAILPOINT",
    "TINY_AGENT_CONFIG",
)


@contextlib.contextmanager
def workspace(root: Path) -> Iterator[Path]:
    """A working directory with sessions beside it, no provider settings and no config file from the host."""
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "README.md").write_text("# Example\n\nA project that prints hi.\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        for name in ENV_CLEARED:
            patch.delenv(name, raising=False)
        patch.setenv("TINY_AGENT_SESSIONS_DIR", str(root / "sessions"))
        patch.setenv("XDG_CONFIG_HOME", str(root / "config"))
        patch.setenv("XDG_DATA_HOME", str(root / "data"))
        patch.setenv("HOME", str(root))
        yield work


def tiny(*args: str) -> tuple[int, str, str]:
    """The CLI in-process: exit code, stdout, stderr (with byte buffers: commands write bytes too)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exited:
            code = exited.code if isinstance(exited.code, int) else 1
        else:
            code = 0
    return code, _text(out), _text(err)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


def run(server: LoopbackServer, prompt: str, *flags: str, model: str = "test/model") -> tuple[int, str, str]:
    base = ["--base-url", server.base_url, "--model", model, "--durability", "process", "--retry-wait", "0.01"]
    return tiny("run", prompt, *base, *flags)


def only_session(root: Path) -> Path:
    (path,) = sorted((root / "sessions").glob("*.jsonl"))
    return path


def make_story(root: Path) -> Path:
    """Three runs: retried + tool + stream; a failure; the step limit."""
    with workspace(root):
        shape = StreamShape(usage_chunk=True)
        first = [
            replies.failure("chat", 429, "slow down", retry_after="0"),
            replies.read(),
            replies.stream("chat", replies.text_answer(), seed=1, shape=shape),
        ]
        with LoopbackServer(first) as server:
            code, _, err = run(server, "What is this project?", "--provider", "openai", "--stream")
        assert code == 0, err
        path = only_session(root)
        with LoopbackServer([replies.failure("chat", 400, "model not found: nope")]) as server:
            code, _, err = run(server, "And now?", "--session", str(path), "--no-stream")
        assert code == 1, err
        with LoopbackServer(EndlessToolCaller("chat")) as server:
            code, _, err = run(server, "Read it again and again.", "--session", str(path), "--no-stream", "--max-steps", "2")
        assert code == 1 and "STEP_LIMIT" in err, err
    return path


def _hostile_body(text: str, **extra: object) -> bytes:
    message = {"role": "assistant", "content": text, "reasoning": HOSTILE, "refusal": None}
    return replies.body(message, **extra)


def make_hostile(root: Path) -> Path:
    """Hostile markup everywhere a journal holds text."""
    with workspace(root) as work:
        (work / "hostile.md").write_text(f"# notes\n{HOSTILE}\n")
        call = replies.calls(("read", json.dumps({"path": "hostile.md", "note": HOSTILE})))
        answer = Reply(body=_hostile_body(f"Here it is: {HOSTILE}", system_fingerprint=HOSTILE))
        with LoopbackServer([call, answer]) as server:
            code, _, err = run(server, f"Summarise {HOSTILE}", "--no-stream", model=HOSTILE_MODEL)
        assert code == 0, err
        path = only_session(root)
        failure = Reply(status=500, body=json.dumps({"error": {"message": HOSTILE}}).encode())
        with LoopbackServer([failure]) as server:
            code, _, err = run(server, "Again", "--session", str(path), "--no-stream", "--retries", "0", model=HOSTILE_MODEL)
        assert code == 1, err
    return path


REPORTED = [
    {"prompt_tokens": 300, "completion_tokens": 20, "cost": 0.000338},
    {"prompt_tokens": 320, "completion_tokens": 25, "cost": 0.000338},
]
"""Two answers whose provider reports each one's cost: $0.000676 in all."""
UNPRICED = [{"prompt_tokens": 300, "completion_tokens": 20}, {"prompt_tokens": 320, "completion_tokens": 25}]
"""Two answers with tokens and no cost: without a price in the config there is no figure."""
ZERO = [{"prompt_tokens": 0, "completion_tokens": 0}] * 2
"""Two answers that report no tokens at all."""


def make_answers(root: Path, usages: list[dict[str, object]], model: str = "test/model") -> Path:
    """One run per usage, each a plain answer whose body reports exactly that ``usage``."""
    with workspace(root):
        flags: tuple[str, ...] = ()
        for number, usage in enumerate(usages, start=1):
            with LoopbackServer([replies.answer(f"answer {number}", usage=usage)]) as server:
                code, _, err = run(server, f"question {number}", "--no-stream", *flags, model=model)
            assert code == 0, err
            flags = ("--session", str(only_session(root)))
    return only_session(root)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_story(tmp_path_factory.mktemp("story"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_hostile(tmp_path_factory.mktemp("hostile"))


def test_the_story_has_a_retry_a_tool_call_a_stream_a_failure_and_the_step_limit(story: Path) -> None:
    state = read_journal(story)
    assert state.runCount == 3
    statuses = [fact.raw.status for _, fact in raw_facts(story)]
    assert statuses[:3] == [429, 200, 200] and statuses[3] == 400
    assert any(fact.raw.contentType == "text/event-stream" for _, fact in raw_facts(story))
    text = story.read_text()
    assert '"code":"step_limit"' in text and '"code":"http_error"' in text and '"toolStarted"' in text


def test_the_hostile_session_keeps_its_markup_verbatim(hostile: Path) -> None:
    text = hostile.read_text()
    assert text.count("onerror") >= 5, "the journal holds the markup as it came"
    assert read_journal(hostile).header.model == HOSTILE_MODEL
    assert os.path.getsize(hostile) > 0
