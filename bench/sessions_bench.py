#!/usr/bin/env python3
"""`tiny-agent sessions` over many journals vs a full reduce of all of them, measured in one run.

    python bench/sessions_bench.py [--sessions 1000] [--kb 100]

Makes N sessions of about K KB each (valid v3 journals written by the real
writer, each with its own id) in a temporary sessions directory, then times:

- a full reduce of every journal (what listing would cost without the index);
- ``list_sessions`` with no index yet (it reduces everything once and writes
  the index);
- ``list_sessions`` again (the index is trusted while each journal's length
  and last bytes still match; only lock checks and a 4 KiB tail read remain);
- the same after appending to one journal (one re-reduce).

Target: the warm listing under 10% of the full reduce.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from builders import Clock, RunWriter, header  # noqa: E402

from tiny_agent.journal.ids import uuid7  # noqa: E402
from tiny_agent.stores.files.catalog import INDEX_NAME, list_sessions  # noqa: E402
from tiny_agent.stores.files.disk import journal_name  # noqa: E402
from tiny_agent.stores.journal import JournalWriter, read_journal  # noqa: E402


def make_session(path: Path, kilobytes: int) -> None:
    writer = JournalWriter.create(path, header(), durability="process", clock=Clock())
    run = RunWriter(writer)
    while writer.state.repairedLength < kilobytes * 1024:
        run.start("Summarise the log for me, please.")
        run.attempt()
        asked = run.call_tools([("read", '{"path":"app.log"}')])
        run.run_tool(asked, 0, "2026-01-01 12:00:00 INFO started worker pool\n" * 40)
        run.attempt()
        run.finish(run.answer("The log shows a worker pool starting forty times."))
    writer.close()


def best(work, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


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

        full = best(lambda: [read_journal(path) for path in journals], repeat=2)

        def cold() -> None:
            (store / INDEX_NAME).unlink(missing_ok=True)
            list_sessions(store)

        cold_time = best(cold, repeat=2)
        list_sessions(store)
        warm_times = [best(lambda: list_sessions(store)) for _ in range(3)]
        warm = statistics.median(warm_times)
        writer = JournalWriter.open(journals[-1], durability="process", clock=Clock())
        RunWriter(writer).start("one more question")
        writer.close()
        started = time.perf_counter()
        rows = list_sessions(store)
        one_changed = time.perf_counter() - started
    print(f"full reduce of every journal   {full * 1000:9.1f} ms")
    print(f"sessions, no index yet         {cold_time * 1000:9.1f} ms  ({cold_time / full:.2f} of the full reduce)")
    print(f"sessions, index warm           {warm * 1000:9.1f} ms  ({warm / full:.3f} of the full reduce; target < 0.10)")
    print(f"sessions, one journal changed  {one_changed * 1000:9.1f} ms  ({len(rows)} rows)")


if __name__ == "__main__":
    main()
