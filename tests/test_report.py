"""`tiny-agent report`: usage across sessions from the sessions index, per day, model or session."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from builders import RunWriter, header
from conftest import PROJECT_ROOT, conformance_dir
from test_view_support import make_story, tiny, workspace

from tiny_agent.journal.transcript import Usage
from tiny_agent.stores.files import catalog
from tiny_agent.stores.files.catalog import INDEX_NAME, INDEX_VERSION, report_entries
from tiny_agent.stores.files.disk import journal_name
from tiny_agent.stores.journal import JournalWriter, committed_lines, read_journal
from tiny_agent.stores.listing import Bucket, usage_buckets

DAY = 86_400_000
MIDNIGHT = 1_787_356_800_000
"""2026-08-22 00:00 UTC."""


class SteppingClock:
    """Milliseconds that tick by 7 and jump a day when told to."""

    def __init__(self) -> None:
        self.now = MIDNIGHT + 3_600_000

    def __call__(self) -> int:
        self.now += 7
        return self.now


def two_day_session(directory: Path, cwd: str = "/workspace") -> Path:
    """Day 1: a completed run (usage 12/3/4/0 and 100/10/50/0); day 2: a run left open (crashed)."""
    clock = SteppingClock()
    first = header(cwd=cwd)
    path = directory / journal_name(first.id, first.createdAt)
    writer = JournalWriter.create(path, first, durability="process", clock=clock)
    run = RunWriter(writer)
    run.start("day one")
    run.attempt()
    asked = run.call_tools([("read", '{"path":"README.md"}')])
    run.run_tool(asked, 0, "hi")
    run.attempt()
    run.finish(run.answer("done", Usage(100, 10, 50, 0)))
    clock.now += DAY
    run.start("day two")
    run.attempt()
    writer.close(seal=False)
    return path


def test_buckets_split_usage_by_day_and_count_runs_by_outcome(tmp_path: Path) -> None:
    path = two_day_session(tmp_path)
    buckets = usage_buckets(committed_lines(path), "header/model")
    assert buckets == [
        Bucket(day="2026-08-22", model="test/model", attempts=2, reported=2, input=112, output=13, cacheRead=54, cacheWrite=0, completed=1),
        Bucket(day="2026-08-23", model="test/model", attempts=1, open=1),
    ]
    usage = read_journal(path).usage
    assert (usage.input, usage.output, usage.cacheRead) == (112, 13, 54), "the buckets add up to the ledger"


@pytest.mark.parametrize(
    ("fixture", "outcome"),
    [("completed-tool-run", "completed"), ("aborted-open-attempt-reconciled", "aborted"), ("open-attempt", "open")],
)
def test_runs_by_outcome(fixture: str, outcome: str) -> None:
    path = conformance_dir() / "fixtures" / f"{fixture}.jsonl"
    buckets = usage_buckets(committed_lines(path), "test/model")
    counts = {name: sum(getattr(bucket, name) for bucket in buckets) for name in ("completed", "failed", "aborted", "open")}
    assert counts == {name: int(name == outcome) for name in counts}


def test_the_index_keeps_the_buckets_and_the_warm_report_reads_no_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    two_day_session(store)
    (first,) = report_entries(store)
    assert len(first.summary.buckets) == 2
    index = json.loads((store / INDEX_NAME).read_bytes())
    assert index["version"] == INDEX_VERSION
    (entry,) = index["journals"].values()
    assert [bucket["day"] for bucket in entry["summary"]["buckets"]] == ["2026-08-22", "2026-08-23"]

    def refuse(path: Path) -> None:
        raise AssertionError(f"reduced {path} although the index vouches for it")

    monkeypatch.setattr(catalog, "read_journal", refuse)
    (again,) = report_entries(store)
    assert again.summary.buckets == first.summary.buckets


def test_an_index_of_the_previous_version_is_rebuilt(tmp_path: Path) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    two_day_session(store)
    report_entries(store)
    index = json.loads((store / INDEX_NAME).read_bytes())
    index["version"] = INDEX_VERSION - 1
    for entry in index["journals"].values():
        del entry["summary"]["buckets"]
    (store / INDEX_NAME).write_bytes(msgspec.json.encode(index))
    (entry,) = report_entries(store)
    assert len(entry.summary.buckets) == 2
    assert json.loads((store / INDEX_NAME).read_bytes())["version"] == INDEX_VERSION


# -- the command ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The story session (made here), a two-day session made elsewhere, and a corrupt journal."""
    made = tmp_path_factory.mktemp("report")
    make_story(made)
    sessions = made / "sessions"
    two_day_session(sessions, cwd="/elsewhere")
    tampered = PROJECT_ROOT / "sessions" / "examples" / "tampered.jsonl"
    shutil.copy(tampered, sessions / journal_name(read_journal_header_id(tampered), MIDNIGHT))
    return made


def read_journal_header_id(path: Path) -> str:
    return str(json.loads(path.read_text().split("\n", 1)[0])["id"])


def report(root: Path, *flags: str, config: str | None = None) -> tuple[int, str, str]:
    with workspace(root), pytest.MonkeyPatch.context() as patch:
        if config is not None:
            (root / "config.toml").write_text(config)
            patch.setenv("TINY_AGENT_CONFIG", str(root / "config.toml"))
        return tiny("report", *flags)


def test_report_counts_this_directorys_sessions_by_day(root: Path) -> None:
    code, out, err = report(root)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("usage by day: 1 session (sessions made in ")
    head = lines[1].split()
    assert head[:8] == ["day", "sessions", "runs", "completed", "failed", "aborted", "open", "attempts"]
    (total,) = [line.split() for line in lines if line.startswith("total ")]
    assert total[:8] == ["total", "1", "3", "1", "2", "0", "0", "6"]
    assert total[-3:] == ["≥", "$0.0001", "(partial)"], "the provider's own figure for the attempt that reported one"
    assert "cost: as the provider reported it" in lines and "no price for test/model" in out


def test_report_json_all_by_model_since(root: Path) -> None:
    code, out, err = report(root, "--all", "--by", "model", "--json")
    assert code == 0, err
    figures = json.loads(out)
    assert figures["scope"] == "all" and figures["sessions"] == 2
    assert [row["key"] for row in figures["rows"]] == ["test/model"]
    assert figures["total"]["runs"] == {"completed": 2, "failed": 2, "aborted": 0, "open": 1}
    assert len(figures["skipped"]) == 1 and "corrupt" in figures["skipped"][0]
    code, out, _ = report(root, "--all", "--since", "2026-08-23", "--json")
    later = json.loads(out)
    assert "2026-08-22" not in [row["key"] for row in later["rows"]]
    assert later["total"]["runs"]["completed"] == 1, "the story's run of today only"


REPORTED = (0.0001, 60, 10, 40)
"""The story's one response that reports its own cost: USD, and its input, output and cache read tokens."""


def test_report_prices_and_partial_costs(root: Path) -> None:
    whole = '[models."test/model"]\ninput = 2.0\noutput = 3.0\ncache_read = 0.5\ncache_write = 1.0\n'
    code, out, err = report(root, "--json", config=whole)
    assert code == 0, err
    total = json.loads(out)["total"]
    usd, into, out_, read = REPORTED
    priced = ((total["input"] - into) * 2.0 + (total["output"] - out_) * 3.0 + (total["cacheRead"] - read) * 0.5) / 1e6
    assert total["cost"] == pytest.approx(usd + priced) and total["unpriced"] == ""
    assert total["costFrom"] == ["prices", "provider"]
    code, out, _ = report(root, "--json", config='[models."test/model"]\ninput = 1.0\n')
    partial = json.loads(out)["total"]
    assert partial["cost"] is None and partial["pricedCost"] == pytest.approx(usd + (partial["input"] - into) / 1e6)
    assert partial["unpriced"] == "test/model (output, cache_read)"
    code, out, _ = report(root, config='[models."test/model"]\ninput = 1.0\n')
    assert "≥ $" in out and "(partial)" in out
    assert "cost: as the provider reported it and from your prices" in out


def test_report_by_session_and_html(root: Path, tmp_path: Path) -> None:
    code, out, err = report(root, "--all", "--by", "session")
    assert code == 0, err
    assert "left out: 1 session(s)" in out
    target = tmp_path / "report.html"
    code, out, err = report(root, "--all", "--html", str(target))
    assert code == 0 and out.startswith(f"wrote {target}"), err
    html = target.read_text()
    assert html.count('<g class="bar') == 3, "one bar per day: the two days of one session, and today"
    assert "Content-Security-Policy" in html


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--since", "yesterday"], "give a UTC day as YYYY-MM-DD"),
        (["--since", "2026-02-30"], "not a date"),
        (["--by", "week"], "choose day, model or session"),
        (["--json", "--html", "x.html"], "exclusive"),
    ],
)
def test_report_usage_errors(root: Path, flags: list[str], message: str) -> None:
    code, _, err = report(root, *flags)
    assert code == 2 and err.startswith("USAGE:") and message in err


def test_an_empty_report_says_so(tmp_path: Path) -> None:
    code, out, err = report(tmp_path)
    assert code == 0, err
    assert "no usage to report (--all counts every directory's)" in out
