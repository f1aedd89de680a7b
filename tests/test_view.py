"""`tiny-agent view` without a browser: the view model, the JSON printer, escaping, the policy, size bounds, the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import pytest
from builders import Clock, RunWriter, new_writer, write_tool_session
from conftest import PROJECT_ROOT, conformance_dir
from test_view_support import HOSTILE, HOSTILE_MODEL, make_hostile, make_story, tiny, workspace

from tiny_agent.journal.transcript import Usage
from tiny_agent.oversight.cost import Cost, cost_text, money, price, unpriced
from tiny_agent.providers.userconfig import ModelSettings
from tiny_agent.view import charts, page
from tiny_agent.view.charts import MAX_BARS, Bar, bucketed, token_bars
from tiny_agent.view.json_html import json_html
from tiny_agent.view.model import build_view
from tiny_agent.view.session_page import session_page

EXAMPLES = PROJECT_ROOT / "sessions" / "examples"
FIXTURES = conformance_dir() / "fixtures"


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_story(tmp_path_factory.mktemp("story"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_hostile(tmp_path_factory.mktemp("hostile"))


def render(path: Path, **limits: int) -> str:
    return session_page(build_view(path, handle="abcd", prices={}, **limits))


# -- the view model -------------------------------------------------------------------------


def test_the_story_in_the_model(story: Path) -> None:
    view = build_view(story, handle="abcd", prices={})
    runs = view.operations
    assert [(run.kind, run.number, run.outcome) for run in runs] == [("run", 1, "completed"), ("run", 2, "failed"), ("run", 3, "failed")]
    assert runs[0].retries == 1 and runs[0].tools == 1 and runs[0].attempts == 3
    first_step = runs[0].steps[0]
    assert [attempt.status for attempt in first_step.attempts] == ["retried", "assistant"]
    retried, answered = first_step.attempts
    assert retried.ended == answered.started, "a retried attempt ends when the next one starts"
    assert retried.started <= retried.responded <= retried.ended  # type: ignore[operator]
    (tool,) = first_step.tools
    assert (tool.name, tool.outcome, tool.replay) == ("read", "success", "safe")
    assert tool.result is not None and "prints hi" in tool.result.text
    assert tool.started is not None and tool.finished is not None and tool.started <= tool.finished
    assert runs[1].errorCode and not runs[1].step_limit
    assert (runs[1].steps[0].attempts[0].audit.failure or "").startswith("http_error: HTTP 400")
    assert runs[2].step_limit and view.last_run is runs[2]
    assert view.verdict.status == "ok"
    assert [attempt.number for attempt in view.attempts] == list(range(1, len(view.report.attempts) + 1))
    streamed = runs[0].steps[1].attempts[0]
    assert streamed.detail is not None and streamed.detail.raw is not None
    assert streamed.detail.raw.kind == "stream" and streamed.detail.raw.value["choices"][0]["message"]["content"]
    assert streamed.detail.canonical == {"role": "assistant", "content": streamed.answer.text}  # type: ignore[union-attr]


def test_a_compaction_is_an_operation_of_its_own() -> None:
    view = build_view(FIXTURES / "completed-compaction.jsonl", handle="", prices={})
    kinds = [(operation.kind, operation.outcome) for operation in view.operations]
    assert kinds == [("run", "completed"), ("compaction", "completed")]
    compaction = view.operations[1].compaction
    assert compaction is not None and (compaction.compacted, compaction.retained) == (1, 3)
    assert compaction.summary.size > 0
    html = session_page(view)
    assert 'data-operation="compaction-1"' in html and "The model&#x27;s context restarts from here." in html
    assert view.verdict.status == "unsealed"


def test_an_abort_and_an_open_attempt_are_marked() -> None:
    aborted = build_view(FIXTURES / "aborted-open-attempt-reconciled.jsonl", handle="", prices={})
    (run,) = aborted.operations
    assert (run.outcome, run.abortPhase) == ("aborted", "model")
    assert "abort requested (model)" in session_page(aborted)
    crashed = build_view(FIXTURES / "open-attempt.jsonl", handle="", prices={})
    assert crashed.operations[-1].outcome == "open"
    assert crashed.attempts[-1].status == "open"
    assert "crashed or interrupted" in session_page(crashed)


def _accepted_fixtures() -> list[str]:
    cases = json.loads((FIXTURES / "manifest.json").read_text())["fixtures"]
    return [case["file"] for case in cases if json.loads((FIXTURES / case["expected"]).read_text())["ok"]]


@pytest.mark.parametrize("name", _accepted_fixtures())
def test_every_accepted_conformance_journal_renders(name: str) -> None:
    html = render(FIXTURES / name)
    assert html.startswith("<!DOCTYPE html>") and html.endswith("</html>\n")


# -- bounded size ---------------------------------------------------------------------------


def _many_runs(path: Path, runs: int, content: str = "x") -> Path:
    writer = new_writer(path)
    run = RunWriter(writer)
    for number in range(runs):
        run.start(f"question {number} " + content)
        run.attempt()
        asked = run.call_tools([("read", '{"path":"README.md"}')])
        run.run_tool(asked, 0, content)
        run.attempt()
        run.finish(run.answer("answer " + content, Usage(100, 10, 50 * (number % 3), 5)))
    writer.close()
    return path


def test_a_long_session_keeps_panels_at_the_ends_and_folds_the_middle(tmp_path: Path) -> None:
    path = _many_runs(tmp_path / "long.jsonl", 60)
    view = build_view(path, handle="", prices={}, full=3, rows=10)
    assert len(view.attempts) == 120
    with_panels = [attempt.number for attempt in view.attempts if attempt.detail is not None]
    assert with_panels == [1, 2, 3, 118, 119, 120]
    folded = [operation.number for operation in view.operations if operation.folded]
    assert folded == list(range(6, 56)), "runs whose attempts are all beyond the first and last 10 are folded"
    assert all(not operation.steps for operation in view.operations if operation.folded)
    html = session_page(view)
    assert html.count('class="raw-canonical"') == 6
    assert html.count("data-attempt=") == 20
    assert 'data-folded="50"' in html
    assert html.count('class="bar') == 120, "the chart still has every attempt"


def test_long_contents_are_cut_with_their_size(tmp_path: Path) -> None:
    big = "line of output\n" * 20_000
    path = _many_runs(tmp_path / "big.jsonl", 2, content=big)
    html = render(path)
    assert f"({len('answer ' + big):,} characters)" in html
    assert "(showing the first 16,384)" in html
    assert len(html) < 400_000


def test_charts_bucket_thousands_of_bars() -> None:
    bars = [Bar(key=str(number), label="", tokens=(number, 1, 0, 2)) for number in range(1, 5001)]
    shown = bucketed(bars)
    assert len(shown) <= MAX_BARS
    assert sum(bar.tokens[0] for bar in shown) == sum(bar.tokens[0] for bar in bars)
    assert shown[0].key == "1–13" and shown[-1].key.endswith("–5000")
    svg = token_bars(bars, title="t", css="tokens")
    assert svg.count('<g class="bar') == len(shown)
    assert "5,000 bars drawn as" in svg


# -- JSON, escaped and marked ---------------------------------------------------------------


def test_json_html_marks_exactly_the_dropped_paths() -> None:
    value = {"choices": [{"message": {"content": "<b>hi</b>", "reasoning": "r"}, "index": 0}], "usage": {"cost": 1}}
    html = json_html(value, frozenset({"choices[0].message.reasoning", "usage.cost", "choices[0].index"}))
    marked = re.findall(r'<mark class="dropped"[^>]*>(.*?)</mark>', html)
    assert len(marked) == 3
    assert "reasoning" in marked[0] and "index" in marked[1] and "cost" in marked[2]
    assert "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>" not in html


def test_json_html_is_bounded() -> None:
    html = json_html({"text": "a" * 10_000, "list": list(range(50_000))}, budget=20_000)
    assert "8,000 more characters" in html
    assert "cut here: the whole body is" in html
    assert len(html) < 60_000
    deep: object = "bottom"
    for _ in range(200):
        deep = [deep]
    assert "nested too deep" in json_html(deep)


# -- hostile input, and the policy ------------------------------------------------------------


def test_hostile_content_is_escaped_everywhere(hostile: Path) -> None:
    html = render(hostile)
    body = html.split("<body>", 1)[1]
    assert body.count("<script>") == 1, "only the page's own script"
    assert "<img" not in body and "<svg onload" not in body and 'href="javascript:' not in body
    assert not re.search(r"<[a-z][^>]*\son[a-z]+=", body), "no element carries an event handler"
    assert not re.search(r"<[a-z][^>]*\sstyle=", html), "no inline style attribute"
    assert body.count("</style>") == 0
    assert "&lt;script&gt;window.__pwned = 1" in body
    assert page.text(HOSTILE_MODEL) in body
    assert HOSTILE not in html


def test_the_policy_allows_only_the_pages_own_style_and_script() -> None:
    def digest(text: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    html = page.document("t", "<p>x</p>", toolbar="<button id='expand'>e</button>")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy is not None
    rules = dict(rule.strip().split(" ", 1) for rule in policy.group(1).replace("&#x27;", "'").split(";"))
    assert rules["default-src"] == "'none'"
    assert rules["style-src"] == f"'{digest(page.CSS)}'"
    assert rules["script-src"] == f"'{digest(page.SCRIPT)}'"
    assert f"<style>{page.CSS}</style>" in html and f"<script>{page.SCRIPT}</script>" in html
    assert html.index("Content-Security-Policy") < html.index("<style>")


def test_charts_escape_their_labels() -> None:
    svg = charts.token_bars([Bar(key="<k>", label="</title><script>", tokens=(1, 2, 3, 4))], title="<t>", css="x")
    assert "<script>" not in svg and "&lt;/title&gt;&lt;script&gt;" in svg and 'data-key="&lt;k&gt;"' in svg


# -- prices -----------------------------------------------------------------------------------


def test_a_price_is_never_guessed() -> None:
    usage = Usage(input=1_000_000, output=500_000, cacheRead=2_000_000, cacheWrite=0)
    whole = price(usage, "m", {"m": ModelSettings(input=1.0, output=4.0, cache_read=0.1)})
    assert whole == Cost(amount=1.0 + 2.0 + 0.2, missing=(), sources=("prices",))
    assert money(whole) == "$3.20" and cost_text(whole) == "$3.20 from your prices"
    partial = price(usage, "m", {"m": ModelSettings(input=1.0, output=4.0)})
    assert partial.missing == ("m: cache_read",) and money(partial) == "≥ $3.00 (partial)"
    assert money(price(usage, "other", {})) == "n/a"
    assert unpriced(price(usage, "other", {})) == "other (input, output, cache_read)"
    assert price(Usage(), "other", {}).known and cost_text(price(Usage(), "other", {})) == "n/a", "no tokens, no price: n/a"
    assert cost_text(price(Usage(), "m", {"m": ModelSettings(input=1.0)})) == "$0 from your prices"


def test_the_providers_own_cost_is_used_and_labelled() -> None:
    reported = Cost(0.000676, sources=("provider",))
    assert cost_text(reported) == "$0.000676 as the provider reported it"
    both = reported + price(Usage(input=1_000_000), "m", {"m": ModelSettings(input=1.0)})
    assert cost_text(both) == "$1.00 as the provider reported it and from your prices"
    assert cost_text(reported + price(Usage(output=5), "x", {})) == "≥ $0.000676 (partial) as the provider reported it"


def test_the_view_prices_attempts_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=1)
    view = build_view(path, handle="", prices={"test/model": ModelSettings(input=1, output=1, cache_read=1, cache_write=1)})
    assert view.cost.known and view.cost.amount == pytest.approx(sum(a.audit.usage.prompt_total + a.audit.usage.output for a in view.attempts) / 1e6)


# -- the command ------------------------------------------------------------------------------


def test_view_writes_under_the_data_directory_by_default(story: Path, tmp_path: Path) -> None:
    with workspace(tmp_path):
        code, out, err = tiny("view", str(story))
        data = Path(os.environ["XDG_DATA_HOME"])
    assert code == 0, err
    target = Path(out.split()[1])
    assert target.parent == data / "tiny-agent" / "views" and target.name.endswith(".html")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert not list((tmp_path / "work").glob("*.html")), "nothing beside the user's files"


def test_view_to_stdout_and_by_handle(story: Path, tmp_path: Path) -> None:
    with workspace(story.parent.parent):
        code, out, err = tiny("view", story.name.split("_")[1][:-6], "-o", "-")
    assert code == 0, err
    assert out.startswith("<!DOCTYPE html>") and "Session " in out


def test_view_of_a_corrupt_journal_fails_closed(tmp_path: Path) -> None:
    code, out, err = tiny("view", str(EXAMPLES / "tampered.jsonl"), "-o", str(tmp_path / "x.html"))
    assert code == 65 and err.startswith("SEAL_MISMATCH") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()
    code, _, err = tiny("view", str(tmp_path / "missing.jsonl"))
    assert code == 66 and err.startswith("NOT_FOUND")


def test_the_clock_in_rows_comes_from_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write_tool_session(path, runs=1)
    view = build_view(path, handle="", prices={})
    (run,) = view.operations
    assert run.finished is not None and run.finished > run.started
    start = Clock()()
    assert run.started >= start
    assert page.duration(run.started, run.finished).endswith(" ms")


# -- what else a panel shows: adapters, an early end, redactions, bodies that are not JSON -----------


def test_panels_show_adapters_an_early_end_and_redactions(tmp_path: Path) -> None:
    import replies
    from test_view_support import run

    from tiny_agent.loopback import LoopbackServer, Reply

    key = "sk-test-0123456789abcdefghijklmn"
    quirky = (PROJECT_ROOT / "fixtures" / "wire" / "vllm-empty-tool-calls.json").read_bytes()
    echoed = Reply(body=replies.body({"role": "assistant", "content": f"your key is {key}"}))
    cut = replies.stream("chat", replies.text_answer(), seed=4, break_off_after=60)
    with workspace(tmp_path), pytest.MonkeyPatch.context() as patch:
        patch.setenv("TINY_AGENT_API_KEY", key)
        with LoopbackServer([Reply(body=quirky)]) as server:
            code, _, err = run(server, "hi", "--provider", "vllm", "--no-stream")
        assert code == 0, err
        journal = next((tmp_path / "sessions").glob("*.jsonl"))
        with LoopbackServer([echoed]) as server:
            code, _, err = run(server, "and the key?", "--session", str(journal), "--no-stream")
        assert code == 0, err
        with LoopbackServer([cut]) as server:
            code, _, err = run(server, "again", "--session", str(journal), "--stream", "--retries", "0")
        assert code == 1, err
    view = build_view(journal, handle="", prices={})
    html = session_page(view)
    first, second, third = view.attempts
    assert first.audit.response is not None and first.audit.response.adapted
    assert html.count("adapters changed") == 1 and "empty-tool-calls-is-none" in html
    assert second.audit.response is not None and second.audit.response.redactions == 1
    assert "secret occurrence(s) replaced before journaling" in html and key not in html
    assert third.audit.response is not None and third.audit.response.incomplete
    assert "ended early" in html


def test_bodies_that_are_not_json_or_not_text(tmp_path: Path) -> None:
    from tiny_agent.journal.facts import RawFact, RawResponse

    path = tmp_path / "odd.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("first")
    run.attempt()
    run.raw("<html><body><h1>502 Bad Gateway</h1><script>window.__pwned=1</script></body></html>", status=502)
    run.attempt(2)
    blob = base64.b64encode(b"\xff\xfe\x00binary").decode()
    raw = RawResponse(status=200, contentType="application/octet-stream", bodyBase64=blob)
    writer.commit([RawFact(id="", operationId=run.operation_id, attemptId=run.attempt_id, raw=raw)])
    run.fail_step()
    writer.close(seal=False)
    view = build_view(path, handle="", prices={})
    kinds = [attempt.detail.raw.kind for attempt in view.attempts if attempt.detail and attempt.detail.raw]
    assert kinds == ["text", "binary"]
    html = session_page(view)
    assert "Not JSON: shown as text." in html and "&lt;h1&gt;502 Bad Gateway&lt;/h1&gt;" in html
    assert "Not UTF-8 text: the journal keeps it as base64." in html and blob in html
    assert "<h1>502" not in html


def test_a_compaction_written_by_tiny_agent_is_a_folded_region(tmp_path: Path) -> None:
    import replies

    from tiny_agent.loopback import LoopbackServer

    journal = make_story(tmp_path)
    summary = "Summary: the user asked about a project that prints hi."
    with workspace(tmp_path), LoopbackServer([replies.answer(summary)]) as server:
        flags = ["--keep-tokens", "40", "--base-url", server.base_url, "--model", "test/model", "--durability", "process"]
        code, _, err = tiny("compact", str(journal), *flags)
    assert code == 0, err
    view = build_view(journal, handle="", prices={})
    compaction = view.operations[-1]
    assert (compaction.kind, compaction.number, compaction.outcome) == ("compaction", 1, "completed")
    assert compaction.compaction is not None and compaction.compaction.summary.text == summary
    assert compaction.compaction.retained == 2 and compaction.attempts == 1
    html = session_page(view)
    region = re.search(r'<details class="operation compaction completed" id="compaction-1"[^>]*>', html)
    assert region is not None and " open" not in region.group(0), "folded until opened"
