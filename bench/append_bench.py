#!/usr/bin/env python3
"""Commit cost near fact 100 and near fact 100,000 of one session, with and without fsync.

    python bench/append_bench.py [--facts 100000] [--window 300]

Builds one v3 session with the real writer, appending realistic run
transactions (user + runStarted, stepAttempt, raw response, assistant +
usage, toolStarted, tool result, ..., operationFinished; every line sealed).
Around fact 100 and again around fact N it times a window of commits, once
with ``--durability process`` and once with ``fsync``, and prints the time per
commit and the ratio late/early (flat = 1.00; the target is <= 1.5).  Both
windows of a mode are measured in the same run; the machine is noisy, so each
window is the median of three.
"""

from __future__ import annotations

import argparse
import os
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

from tiny_agent.stores.journal import JournalWriter  # noqa: E402

RAW_BODY = (
    '{"id":"gen-1","object":"chat.completion","model":"test/model","choices":[{"index":0,"finish_reason":"tool_calls",'
    '"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":'
    '{"name":"read","arguments":"{\\"path\\":\\"README.md\\"}"}}]}}],"usage":{"prompt_tokens":120,"completion_tokens":12}}'
)


def one_run(run: RunWriter) -> int:
    """Commit one tool-using run; returns the number of commits it took."""
    run.start("What does the README say about installing?")
    run.attempt()
    run.raw(RAW_BODY)
    asked = run.call_tools([("read", '{"path":"README.md"}')])
    run.run_tool(asked, 0, "# Example\n\nInstall with pip.\n" * 4)
    run.attempt()
    run.raw(RAW_BODY)
    answer = run.answer("It says to install with pip.")
    run.finish(answer)
    return 9


def timed_commits(writer: JournalWriter, count: int) -> float:
    """Seconds per commit over ``count`` commits of ordinary run transactions."""
    run = RunWriter(writer)
    done = 0
    started = time.perf_counter()
    while done < count:
        done += one_run(run)
    return (time.perf_counter() - started) / done


def sample(base: Path, durability: str, count: int) -> float:
    """Seconds per commit when appending ``count`` commits to a fresh copy of ``base``."""
    copy = base.with_name(f"{base.stem}-sample.jsonl")
    shutil.copyfile(base, copy)
    with open(copy, "rb+") as file:
        os.fsync(file.fileno())  # else the first timed fsync pays for flushing the whole copy
    writer = JournalWriter.open(copy, durability=durability, clock=Clock())  # type: ignore[arg-type]
    try:
        return timed_commits(writer, count)
    finally:
        writer.close(seal=False)
        copy.unlink()


def grow(path: Path, facts: int) -> int:
    writer = JournalWriter.open(path, durability="process", clock=Clock())
    run = RunWriter(writer)
    while writer.state.factCount < facts:
        one_run(run)
    count = writer.state.factCount
    writer.close(seal=False)
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=100_000, help="where to take the late window (default 100000)")
    parser.add_argument("--window", type=int, default=500, help="commits per timed window (default 500)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        early_base = Path(directory) / "early.jsonl"
        JournalWriter.create(early_base, header(), durability="process", clock=Clock()).close(seal=False)
        early_at = grow(early_base, 100)
        late_base = Path(directory) / "late.jsonl"
        shutil.copyfile(early_base, late_base)
        late_at = grow(late_base, args.facts)
        size = late_base.stat().st_size
        sample(early_base, "process", args.window)  # warm-up: imports, caches, the allocator
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for mode in ("process", "fsync"):
                for position, base in (("early", early_base), ("late", late_base)):
                    times.setdefault((mode, position), []).append(sample(base, mode, args.window))
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"one v3 session; windows of {args.window} commits appended at fact {early_at} and at fact {late_at} ({size / 1e6:.1f} MB)")
    print(f"median of {args.rounds} interleaved rounds")
    print(f"{'durability':<11} {'µs/commit early':>16} {'µs/commit late':>15} {'late/early':>11}")
    for mode in ("process", "fsync"):
        early, late = median[(mode, "early")], median[(mode, "late")]
        print(f"{mode:<11} {early * 1e6:>16.1f} {late * 1e6:>15.1f} {late / early:>11.2f}")
    print("flat = 1.00; target <= 1.5")


if __name__ == "__main__":
    main()
