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
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_view_support import REPORTED, UNPRICED, ZERO, make_answers, make_hostile, make_story, tiny, workspace

from tiny_agent.view import charts
from tiny_agent.view.page import document

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
    assert "as the provider reported it" in (page.locator("svg.cost title").first.text_content() or "")
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


# -- the charts' layout, measured on the rendered page ------------------------------------------

LAYOUT = """svg => {
  const box = element => { const r = element.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const bars = [...svg.querySelectorAll("g.bar")].map(g => ({key: g.dataset.key, box: box(g),
    segments: [...g.querySelectorAll("rect")].map(r => ({box: box(r), fill: getComputedStyle(r).fill, opacity: +getComputedStyle(r).opacity}))}));
  const labels = [...svg.querySelectorAll("text.axis.x")].map(t => ({slot: +t.dataset.slot, text: t.textContent, box: box(t)}));
  const ticks = [...svg.querySelectorAll("text.axis.y")].map(t => ({text: t.textContent, box: box(t)}));
  const grid = [...svg.querySelectorAll("line.grid")].map(box);
  const points = [...svg.querySelectorAll("polyline.line, circle.line")].flatMap(shape => {
    const m = shape.getScreenCTM();
    const xy = shape.tagName === "circle" ? [{x: shape.cx.baseVal.value, y: shape.cy.baseVal.value}] : [...shape.points];
    return xy.map(p => new DOMPoint(p.x, p.y).matrixTransform(m)).map(p => ({x: p.x, y: p.y}));
  });
  return {svg: box(svg), bars, labels, ticks, grid, points, scale: window.devicePixelRatio};
}"""


def png_rows(data: bytes) -> tuple[int, list[bytes]]:
    """Bytes per pixel and the pixel rows of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, compressed, head = 8, b"", b""
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        chunk = data[position + 8 : position + 8 + length]
        head, compressed = (
            (chunk, compressed) if kind == b"IHDR" else (head, compressed + chunk if kind == b"IDAT" else compressed)
        )
        position += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", head)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "an 8-bit RGB(A) PNG"
    size = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(compressed), width * size
    rows: list[bytes] = []
    above = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride) if kind else ():
            a, b, c = (line[i - size] if i >= size else 0), above[i], (above[i - size] if i >= size else 0)
            p = a + b - c
            guess = (
                a,
                b,
                (a + b) // 2,
                a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c,
            )
            line[i] = (line[i] + guess[kind - 1]) & 255
        rows.append(bytes(line))
        above = line
    return size, rows


def rgb(css: str) -> tuple[int, ...]:
    return tuple(int(part) for part in css[css.index("(") + 1 : css.index(")")].split(",")[:3])


class Chart:
    """A chart as the browser laid it out (DOM boxes, in CSS pixels) and as it was painted (its screenshot)."""

    def __init__(self, page: Any, selector: str) -> None:
        self.selector = selector
        svg = page.locator(selector)
        svg.scroll_into_view_if_needed()
        self.layout: dict[str, Any] = svg.evaluate(LAYOUT)
        self.size, self.rows = png_rows(svg.screenshot())

    def pixel(self, x: float, y: float) -> tuple[int, ...]:
        """The painted colour at page point (x, y) of the viewport."""
        scale, origin = self.layout["scale"], self.layout["svg"]
        column, row = int((x - origin["left"]) * scale), int((y - origin["top"]) * scale)
        return tuple(self.rows[row][column * self.size : column * self.size + 3])

    def darkest(self, box: dict[str, float]) -> int:
        """The darkest channel painted inside ``box`` (text is drawn where it is dark)."""
        steps = [
            (box["left"] + (box["right"] - box["left"]) * i / 8, box["top"] + (box["bottom"] - box["top"]) * j / 8)
            for i in range(1, 8)
            for j in range(1, 8)
        ]
        return min(min(self.pixel(x, y)) for x, y in steps)


def centre(box: dict[str, float]) -> float:
    return (box["left"] + box["right"]) / 2


def assert_labels_line_up(chart: Chart, slots: list[float]) -> None:
    """Each x label is centred on its slot (a bar's centre, a point's x), below the plot, apart from its neighbours."""
    layout, where = chart.layout, chart.selector
    labels = sorted(layout["labels"], key=lambda label: label["box"]["left"])
    assert labels, f"{where}: no x-axis label"
    for label in labels:
        assert abs(centre(label["box"]) - slots[label["slot"]]) <= 1.0, f"{where}: {label} is off its slot {slots[label['slot']]}"
        assert layout["svg"]["left"] <= label["box"]["left"] and label["box"]["right"] <= layout["svg"]["right"], (
            f"{where}: {label}"
        )
        assert label["box"]["top"] >= max(line["bottom"] for line in layout["grid"]) - 1, f"{where}: {label} is inside the plot"
        assert chart.darkest(label["box"]) < 200, f"{where}: nothing painted where the DOM puts {label['text']!r}"
    for left, right in zip(labels, labels[1:], strict=False):
        assert left["box"]["right"] + 2 <= right["box"]["left"], f"{where}: labels {left['text']!r} and {right['text']!r} touch"


def assert_bars_are_painted_where_the_dom_says(chart: Chart) -> None:
    """The screenshot has each segment's colour at the segment's centre, and background in the gaps between bars."""
    bars, where = chart.layout["bars"], chart.selector
    for bar in bars:
        for segment in bar["segments"]:
            box = segment["box"]
            if box["bottom"] - box["top"] < 4 or box["right"] - box["left"] < 4:
                continue
            expected = tuple(round(value * segment["opacity"] + 255 * (1 - segment["opacity"])) for value in rgb(segment["fill"]))
            painted = chart.pixel(centre(box), (box["top"] + box["bottom"]) / 2)
            assert all(abs(a - b) <= 3 for a, b in zip(painted, expected, strict=True)), (
                f"{where}: bar {bar['key']}: {painted} != {expected}"
            )
    plot_top, plot_bottom = min(line["top"] for line in chart.layout["grid"]), max(line["top"] for line in chart.layout["grid"])
    for left, right in zip(bars, bars[1:], strict=False):
        if right["box"]["left"] - left["box"]["right"] >= 4:
            gap = (left["box"]["right"] + right["box"]["left"]) / 2
            assert chart.pixel(gap, plot_top + (plot_bottom - plot_top) * 0.25) == (255, 255, 255), f"{where}: paint between bars"


def assert_the_y_axis_fits(chart: Chart, totals: list[int]) -> None:
    """The tallest bar's height over the plot's is its tokens over the axis' top tick."""
    layout = chart.layout
    top_tick = min(layout["ticks"], key=lambda tick: tick["box"]["top"])["text"]
    scale = float(top_tick.rstrip("kM")) * {"k": 1e3, "M": 1e6}.get(top_tick[-1], 1)
    assert scale >= max(totals) > 0 and len({tick["text"] for tick in layout["ticks"]}) == 3, layout["ticks"]
    plot = max(line["top"] for line in layout["grid"]) - min(line["top"] for line in layout["grid"])
    tallest = max(bar["box"]["bottom"] - bar["box"]["top"] for bar in layout["bars"])
    assert abs(tallest / plot - max(totals) / scale) <= 0.02, (tallest, plot, totals, top_tick)


def test_the_session_charts_line_up_with_their_labels(open_page: Any, story: Path, tmp_path: Path) -> None:
    opened = open_page(view_of(story, tmp_path / "story.html"))
    report = audit_of(story)
    tokens = Chart(opened.page, "svg.tokens")
    slots = [centre(bar["box"]) for bar in tokens.layout["bars"]]
    assert [label["text"] for label in tokens.layout["labels"]] == [str(attempt["number"]) for attempt in report["attempts"]]
    assert_labels_line_up(tokens, slots)
    assert_bars_are_painted_where_the_dom_says(tokens)
    usage = [attempt["usage"] or {} for attempt in report["attempts"]]  # None: the attempt reported no usage (no bar)
    # reasoning is a part of output, never a bar of its own
    assert_the_y_axis_fits(tokens, [sum(value for key, value in counts.items() if key != "reasoning") for counts in usage])
    for css in ("svg.rate", "svg.cost"):
        chart = Chart(opened.page, css)
        assert_labels_line_up(chart, slots)
        assert {round(point["x"]) for point in chart.layout["points"]} <= {round(slot) for slot in slots}, (
            f"{css}: a point off its slot"
        )
    assert "Partial" in opened.page.locator("#charts").inner_text(), "one response reported its cost; the others have none"
    opened.quiet()


def test_the_report_charts_line_up_with_their_labels(open_page: Any, story: Path, tmp_path: Path) -> None:
    from test_report import two_day_session

    sessions = tmp_path / "days" / "sessions"
    sessions.mkdir(parents=True)
    shutil.copy(story, sessions / story.name)
    two_day_session(sessions)
    target = tmp_path / "days.html"
    with workspace(tmp_path / "days"):
        code, _, err = tiny("report", "--all", "--by", "day", "--html", str(target))
    assert code == 0, err
    opened = open_page(target)
    tokens = Chart(opened.page, "svg.tokens")
    assert len(tokens.layout["bars"]) == 3 and [label["text"] for label in tokens.layout["labels"]][:2] == [
        "2026-08-22",
        "2026-08-23",
    ]
    slots = [centre(bar["box"]) for bar in tokens.layout["bars"]]
    assert_labels_line_up(tokens, slots)
    assert_bars_are_painted_where_the_dom_says(tokens)
    assert_labels_line_up(Chart(opened.page, "svg.rate"), slots)
    opened.quiet()


def test_many_bars_get_labels_that_never_touch(open_page: Any, tmp_path: Path) -> None:
    bars = [charts.Bar(key=f"2026-01-{day:02d}", label="", tokens=(day * 10, day, 0, 5)) for day in range(1, 32)]
    target = tmp_path / "many.html"
    target.write_text(document("many", charts.token_bars(bars, title="t", css="tokens")))
    opened = open_page(target)
    chart = Chart(opened.page, "svg.tokens")
    labels = chart.layout["labels"]
    assert 1 < len(labels) < len(bars), "thinned, not dropped"
    assert_labels_line_up(chart, [centre(bar["box"]) for bar in chart.layout["bars"]])
    assert_bars_are_painted_where_the_dom_says(chart)
    assert_the_y_axis_fits(chart, [bar.total for bar in bars])
    opened.quiet()


# -- costs and empty charts --------------------------------------------------------------------


def test_no_price_means_no_cost_chart_and_n_a(open_page: Any, tmp_path: Path) -> None:
    opened = open_page(view_of(make_answers(tmp_path / "unpriced", UNPRICED), tmp_path / "unpriced.html"))
    page = opened.page
    assert page.locator("svg.cost").count() == 0
    assert "No cost: the provider reported none, and the config has no price" in page.locator("#charts").inner_text()
    header = page.locator("header").inner_text()
    assert "cost\tn/a · no price for test/model (input, output)" in header, header
    assert page.locator("#attempt-1 .row").inner_text().rstrip().endswith("· n/a")
    opened.quiet()


def test_an_all_zero_chart_says_no_tokens_reported(open_page: Any, tmp_path: Path) -> None:
    opened = open_page(view_of(make_answers(tmp_path / "zero", ZERO), tmp_path / "zero.html"))
    page = opened.page
    text = page.locator("#charts").inner_text()
    assert page.locator("svg.tokens").count() == 0 and page.locator("svg.cost").count() == 0
    assert "Tokens per attempt: input, cache read, cache write, output: no tokens reported." in text
    assert "cost\tn/a" in page.locator("header").inner_text(), "no tokens and no price: n/a, as for tokens without a price"
    opened.quiet()


def test_the_providers_cost_is_used_and_labelled_in_view_and_report(open_page: Any, tmp_path: Path) -> None:
    journal = make_answers(tmp_path / "reported", REPORTED)
    opened = open_page(view_of(journal, tmp_path / "reported.html"))
    page = opened.page
    assert "cost\t$0.000676 as the provider reported it" in page.locator("header").inner_text()
    chart = Chart(page, "svg.cost")
    assert "as the provider reported it" in (page.locator("svg.cost title").first.text_content() or "")
    assert [tick["text"] for tick in sorted(chart.layout["ticks"], key=lambda tick: -tick["box"]["top"])] == [
        "$0",
        "$0.0004",
        "$0.0008",
    ]
    opened.quiet()
    target = tmp_path / "reported-report.html"
    with workspace(tmp_path / "reported"):
        code, out, err = tiny("report")
        assert code == 0, err
        code, _, err = tiny("report", "--html", str(target))
        assert code == 0, err
    assert out.splitlines()[-3].endswith("$0.000676") and out.splitlines()[-1] == "cost: as the provider reported it", out
    opened = open_page(target)
    assert "cost\t$0.000676" in opened.page.locator("header").inner_text()
    assert "cost: as the provider reported it" in opened.page.locator("header").inner_text()
    opened.quiet()
