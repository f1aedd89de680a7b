"""`tiny-agent view` and `report --html` in a real browser: Debian's Chromium, driven by Playwright.

The pages are opened from ``file://`` with every request logged and anything
but the page itself refused; each test fails on a console error or a page
error, and takes a screenshot (its path is printed, so a failing test shows
it).  No browser is ever downloaded: without ``/usr/bin/chromium`` or
Playwright the tests skip, saying why.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_view_support import make_hostile, make_story, tiny, workspace

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_story(tmp_path_factory.mktemp("story"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_hostile(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install -e '.[test]')")
    if not CHROMIUM.exists():
        pytest.skip(f"no browser: {CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)")
    with sync_playwright() as driver:
        try:
            launched = driver.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        except Error as error:
            pytest.skip(f"Chromium at {CHROMIUM} does not start: {str(error).splitlines()[0]}")
        yield launched
        launched.close()


class Opened:
    """A page loaded from a file, with what it logged and asked for."""

    def __init__(self, page: Any, url: str, shot: Path) -> None:
        self.page = page
        self.url = url
        self.shot = shot
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.refused: list[str] = []

    def screenshot(self) -> None:
        self.page.screenshot(path=str(self.shot), full_page=True)
        print(f"screenshot: {self.shot}")

    def quiet(self) -> None:
        """No console error, no page error, and no request but the page itself."""
        assert self.errors == [], f"console or page errors: {self.errors} (screenshot {self.shot})"
        assert self.refused == [], f"requests beyond the page: {self.refused} (screenshot {self.shot})"
        assert self.requests == [self.url], f"requests: {self.requests} (screenshot {self.shot})"


@pytest.fixture()
def open_page(browser: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Any]:
    shots = tmp_path_factory.mktemp("screenshots")
    contexts: list[Any] = []

    def opener(path: Path, *, javascript: bool = True) -> Opened:
        context = browser.new_context(java_script_enabled=javascript, viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        url = path.resolve().as_uri()
        opened = Opened(page, url, shots / f"{request.node.name}-{len(contexts)}.png")

        def route(handled: Any) -> None:
            opened.requests.append(handled.request.url)
            if handled.request.url == url:
                handled.continue_()
            else:
                opened.refused.append(handled.request.url)
                handled.abort()

        context.route("**/*", route)
        page.on("console", lambda message: opened.errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        page.goto(url)
        page.wait_for_load_state("load")
        opened.screenshot()
        return opened

    yield opener
    for context in contexts:
        context.close()


def view_of(journal: Path, target: Path) -> Path:
    code, out, err = tiny("view", str(journal), "-o", str(target))
    assert code == 0, err
    assert out.startswith(f"wrote {target}")
    return target


def audit_of(journal: Path) -> dict[str, Any]:
    code, out, err = tiny("audit", str(journal), "--json")
    assert code == 0, err
    return json.loads(out)


# -- the story session ----------------------------------------------------------------------


def test_the_timeline_shows_runs_steps_attempts_and_tools(open_page: Any, story: Path, tmp_path: Path) -> None:
    opened = open_page(view_of(story, tmp_path / "story.html"))
    page = opened.page
    report = audit_of(story)
    assert page.title().startswith("tiny-agent session")
    operations = page.locator("[data-operation]")
    assert operations.count() == 3
    assert [operations.nth(index).get_attribute("data-operation") for index in range(3)] == ["run-1", "run-2", "run-3"]
    attempts = page.locator("[data-attempt]")
    assert attempts.count() == len(report["attempts"])
    statuses = [attempts.nth(index).get_attribute("data-status") for index in range(attempts.count())]
    assert statuses == [attempt["settled"] for attempt in report["attempts"]]
    assert statuses[:3] == ["retried", "assistant", "assistant"]
    assert "failed" in statuses
    first = page.locator("#run-1")
    assert "1 retry" in first.locator("summary").first.inner_text()
    assert page.locator("#run-1 [data-tool='call_0']").count() == 1
    assert "success" in page.locator("#run-1 [data-tool='call_0']").inner_text()
    assert "HTTP 400" in page.locator("#run-2").inner_text()
    assert "model not found: nope" in page.locator("#run-2").inner_text()
    third = page.locator("#run-3")
    assert "step limit" in third.locator("summary").first.inner_text()
    assert "failed" in (third.get_attribute("class") or "")
    header = page.locator("header").inner_text()
    assert "open tail" in header or "sealed" in header
    assert "step limit" in header, "the last run's outcome is in the header"
    opened.quiet()


def test_the_panels_show_raw_next_to_canonical(open_page: Any, story: Path, tmp_path: Path) -> None:
    opened = open_page(view_of(story, tmp_path / "story.html"))
    page = opened.page
    retried = page.locator("#attempt-1")
    assert "HTTP 429" in retried.inner_text()
    assert "asks to try again later" in retried.inner_text()
    called = page.locator("#attempt-2")
    sent = called.locator(".sent").inner_text()
    kept = called.locator(".kept").inner_text()
    assert '"reasoning": "let me look"' in sent and "reasoning" not in kept
    assert '"tool_calls"' in kept and "stopReason toolUse" in kept
    marked = [text.strip(" ,") for text in called.locator(".sent mark.dropped").all_inner_texts()]
    assert '"reasoning": "let me look"' in marked
    how = called.locator(".how").inner_text()
    assert "tool_calls → toolUse" in how
    assert "prompt_tokens 100 − cached 40 − write 0 = input 60" in how
    streamed = page.locator("#attempt-3")
    assert "event stream" in streamed.locator(".stream-note").inner_text()
    assert "events" in streamed.locator(".row").inner_text()
    assert "It prints hi" in streamed.locator(".kept").inner_text()
    opened.quiet()


def test_the_charts_have_one_bar_per_attempt(open_page: Any, story: Path, tmp_path: Path) -> None:
    opened = open_page(view_of(story, tmp_path / "story.html"))
    page = opened.page
    report = audit_of(story)
    bars = page.locator("svg.tokens g.bar")
    assert bars.count() == len(report["attempts"])
    keys = [bars.nth(index).get_attribute("data-key") for index in range(bars.count())]
    assert keys == [str(attempt["number"]) for attempt in report["attempts"]]
    box = page.locator("svg.tokens").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 50
    assert page.locator("svg.rate polyline").count() >= 1
    assert "No prices known" in page.locator("#charts").inner_text(), "no price is guessed"
    opened.quiet()


def test_prices_from_the_config_draw_the_cost(open_page: Any, tmp_path: Path) -> None:
    journal = make_story(tmp_path / "priced")
    config = tmp_path / "priced" / "config.toml"
    config.write_text('[models."test/model"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\ncache_write = 1.25\n')
    with workspace(tmp_path / "priced"), pytest.MonkeyPatch.context() as patch:
        patch.setenv("TINY_AGENT_CONFIG", str(config))
        target = view_of(journal, tmp_path / "priced.html")
    opened = open_page(target)
    page = opened.page
    assert page.locator("svg.cost polyline, svg.cost circle").count() == 1
    assert "from your prices" in page.locator("header").inner_text()
    assert "n/a from your prices" not in page.locator("header").inner_text()
    opened.quiet()


def test_the_toggles_work_with_script_and_the_page_without(open_page: Any, story: Path, tmp_path: Path) -> None:
    target = view_of(story, tmp_path / "story.html")
    scripted = open_page(target)
    page = scripted.page
    assert page.locator("#toolbar").is_visible(), "the page's own script runs under its CSP"
    page.click("#collapse")
    assert page.evaluate("Array.from(document.querySelectorAll('details')).every(d => !d.open)")
    page.click("#expand")
    assert page.evaluate("Array.from(document.querySelectorAll('details')).every(d => d.open)")
    page.click("#problems")
    assert not page.locator("#attempt-2").is_visible() and page.locator("#attempt-1").is_visible()
    scripted.quiet()
    plain = open_page(target, javascript=False)
    page = plain.page
    assert not page.locator("#toolbar").is_visible()
    prompt = page.locator("#run-1 details.content").first
    page.locator("#run-1 > summary").click()
    page.locator("#run-1 > summary").click()
    assert prompt.is_visible()
    plain.quiet()


# -- hostile content -------------------------------------------------------------------------


def test_a_hostile_session_renders_inert(open_page: Any, hostile: Path, tmp_path: Path) -> None:
    target = view_of(hostile, tmp_path / "hostile.html")
    opened = open_page(target)
    page = opened.page
    expected_title = page.evaluate("document.title")
    assert expected_title.startswith("tiny-agent session ") and "pwned" not in expected_title
    page.click("#expand")
    assert page.title() == expected_title
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("body").is_visible(), "a smuggled </style><style> did not hide the page"
    body = page.locator("body").inner_text()
    assert "<script>window.__pwned = 1" in body, "the markup is shown as text"
    assert 'onerror="window.__pwned' in body
    assert page.locator("img").count() == 0 and page.locator("a[href^='javascript:']").count() == 0
    assert page.locator("body script").count() == 1, "only the page's own script"
    assert page.locator("svg[onload]").count() == 0
    csp = page.locator("meta[http-equiv='Content-Security-Policy']").get_attribute("content")
    assert csp is not None and "default-src 'none'" in csp and "unsafe-inline" not in csp
    opened.quiet()


def test_the_report_page_has_a_bar_per_row(open_page: Any, story: Path, hostile: Path, tmp_path: Path) -> None:
    sessions = tmp_path / "both" / "sessions"
    sessions.mkdir(parents=True)
    for journal in (story, hostile):
        shutil.copy(journal, sessions / journal.name)
    target = tmp_path / "report.html"
    with workspace(tmp_path / "both"):
        code, out, err = tiny("report", "--all", "--by", "session", "--html", str(target))
        assert code == 0, err
        code, figures, err = tiny("report", "--all", "--by", "session", "--json")
    rows = json.loads(figures)["rows"]
    assert len(rows) == 2
    opened = open_page(target)
    page = opened.page
    bars = page.locator("svg.tokens g.bar")
    assert bars.count() == len(rows)
    assert sorted(bars.nth(index).get_attribute("data-key") for index in range(2)) == sorted(row["key"] for row in rows)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.title() == "tiny-agent report by session"
    opened.quiet()
