#!/usr/bin/env python3
"""`tiny-agent report` over many sessions from the index vs reducing them all, measured in one run.

    python bench/report_bench.py [--sessions 1000] [--kb 100]

Makes N sessions of about K KB each (the same journals as
bench/sessions_bench.py: valid v3, written by the real writer), then times:

- a full reduce of every journal: what any report without the index would
  cost at the least (the baseline);
- the report with no index yet (every journal reduced once, plus the light
  pass that buckets usage per day and model, and the index written);
- the report with the index warm, by day, by model and by session;
- the cost of the buckets alone (the light pass over every journal), i.e.
  what indexing pays now on top of the reduce.

Target: the warm report well under 10% of the full reduce.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from sessions_bench import best, make_session  # noqa: E402

from tiny_agent.journal.ids import uuid7  # noqa: E402
from tiny_agent.oversight.report import build_report  # noqa: E402
from tiny_agent.stores.files.catalog import INDEX_NAME, report_entries  # noqa: E402
from tiny_agent.stores.files.disk import journal_name  # noqa: E402
from tiny_agent.stores.journal import committed_lines, read_journal  # noqa: E402
from tiny_agent.stores.listing import usage_buckets  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--kb", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / "sessions"
        store.mkdir(mode=0o700)
        template = Path(directory) / "template.jsonl"
        make_session(template, args.kb)
        for number in range(args.sessions):
            shutil.copyfile(template, store / journal_name(uuid7(), 1_787_371_200_000 + number * 1000))
        journals = sorted(store.glob("*.jsonl"))
        total = sum(path.stat().st_size for path in journals)
        print(f"{len(journals)} sessions, {total / 1e6:.1f} MB in all", flush=True)

        def report(by: str) -> None:
            build_report(report_entries(store), by=by, since=None, prices={}, cwd=None)  # type: ignore[arg-type]

        full = best(lambda: [read_journal(path) for path in journals], repeat=2)
        buckets = best(lambda: [usage_buckets(committed_lines(path), "m") for path in journals], repeat=2)

        def cold() -> None:
            (store / INDEX_NAME).unlink(missing_ok=True)
            report("day")

        cold_time = best(cold, repeat=2)
        report("day")
        warm = {by: statistics.median([best(lambda by=by: report(by)) for _ in range(3)]) for by in ("day", "model", "session")}
    print(f"full reduce of every journal    {full * 1000:9.1f} ms")
    print(f"buckets alone (light pass)      {buckets * 1000:9.1f} ms  ({buckets / full:.2f} of the full reduce)")
    print(f"report, no index yet            {cold_time * 1000:9.1f} ms  ({cold_time / full:.2f} of the full reduce)")
    for by, seconds in warm.items():
        print(f"report --by {by:<8} index warm  {seconds * 1000:9.1f} ms  ({seconds / full:.3f} of the full reduce; target < 0.10)")


if __name__ == "__main__":
    main()
