#!/usr/bin/env python3
"""The PostgreSQL store against the file store, as ratios measured in one run (never absolute thresholds).

    python bench/pg_bench.py [--url postgresql://postgres@127.0.0.1:5432/test] [--facts 10000] [--window 270]
                             [--replay-facts 200000] [--sessions 10000]

- append: µs per commit of ordinary run transactions (fsync durability in
  both stores), near fact 100 and near fact N of one session: PostgreSQL /
  file, and late / early in each store (flat = 1.00);
- replay: MB/s folding the same large session streamed from its rows and
  read from its file, PostgreSQL / file;
- listing: ``sessions`` over N sessions from the index table and from the
  file store's warm index, PostgreSQL / file.

Everything lives in a scratch schema (dropped at the end) and a temporary
directory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import psycopg  # noqa: E402
from append_bench import one_run  # noqa: E402
from builders import Clock, RunWriter  # noqa: E402

from tiny_agent.stores.files.catalog import list_sessions  # noqa: E402
from tiny_agent.stores.files.disk import file_chunks  # noqa: E402
from tiny_agent.stores.files.store import FileStore  # noqa: E402
from tiny_agent.stores.journal import JournalWriter, lines_of, reduce_source  # noqa: E402
from tiny_agent.stores.postgres.store import PgStore  # noqa: E402


def timed_commits(writer: JournalWriter, count: int) -> float:
    run = RunWriter(writer)
    done = 0
    started = time.perf_counter()
    while done < count:
        done += one_run(run)
    return (time.perf_counter() - started) / done


def grow(writer: JournalWriter, facts: int) -> None:
    run = RunWriter(writer)
    while writer.state.factCount < facts:
        one_run(run)


def median_of(rounds: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(rounds))


def append(pg: PgStore, files: FileStore, facts: int, window: int, rounds: int) -> dict[tuple[str, str], float]:
    """µs/commit early and late, each store, fsync; a session per store grown to ``facts`` between the windows."""
    made = {"file": files.create(cwd="/bench", provider="custom", model="m", environment_identity="e", durability="process"),
            "postgres": pg.create(cwd="/bench", provider="custom", model="m", environment_identity="e", durability="process")}
    sessions = {kind: writer.state.header.id for kind, writer in made.items()}
    for writer in made.values():
        grow(writer, 100)
        writer.close(seal=False)
    stores = {"file": files, "postgres": pg}

    def window_of(kind: str) -> float:
        store = stores[kind]
        writer = store.open_writer(store.resolve(sessions[kind]), "fsync")
        writer._clock = Clock()  # noqa: SLF001 - deterministic timestamps, as the other benchmarks
        try:
            return timed_commits(writer, window)
        finally:
            writer.close(seal=False)

    result = {}
    for kind in stores:
        result[(kind, "early")] = median_of(rounds, lambda kind=kind: window_of(kind))  # type: ignore[misc]
    for kind, store in stores.items():
        writer = store.open_writer(store.resolve(sessions[kind]), "process")
        grow(writer, facts)
        writer.close(seal=False)
    for kind in stores:
        result[(kind, "late")] = median_of(rounds, lambda kind=kind: window_of(kind))  # type: ignore[misc]
    return result


def replay(pg: PgStore, files: FileStore, facts: int, rounds: int) -> tuple[int, float, float]:
    """Bytes of one large session, and seconds to fold it from the file and from the rows (median)."""
    writer = files.create(cwd="/bench", provider="custom", model="m", environment_identity="e", durability="process")
    grow(writer, facts)
    writer.close()
    path = writer.path
    lines = [line for _, line in lines_of(file_chunks(path))]
    session_id = writer.state.header.id
    pg.create_from(session_id, 0, lines, "process", "bench")
    size = path.stat().st_size

    def from_file() -> float:
        started = time.perf_counter()
        reduce_source(file_chunks(path))
        return time.perf_counter() - started

    def from_rows() -> float:
        started = time.perf_counter()
        reduce_source(pg.chunks(pg.session(session_id)))
        return time.perf_counter() - started

    assert b"".join(pg.chunks(pg.session(session_id))) == path.read_bytes()
    return size, median_of(rounds, from_file), median_of(rounds, from_rows)


def listing(pg: PgStore, directory: Path, count: int, rounds: int) -> tuple[float, float]:
    """Seconds to list ``count`` sessions: the file store's warm index, and the index table."""
    example = (ROOT / "sessions" / "examples" / "tool-run.jsonl").read_bytes()
    lines = [line for _, line in lines_of([example])]
    from tiny_agent.journal.ids import uuid7
    from tiny_agent.stores.files.disk import journal_name

    directory.mkdir(mode=0o700, exist_ok=True)
    created = 1_787_371_200_000
    for number in range(count):
        session_id = uuid7(created + number)
        text = lines[0].replace(b"01a23843-05ba-7660-8d7e-7f71ebae3f41", session_id.encode())
        (directory / journal_name(session_id, created + number)).write_bytes(text + b"\n")
    conn = pg.connect()
    with conn.transaction(), conn.cursor() as cursor:
        columns = "id, tail, version, created_at, updated_at, cwd, provider, model, status, runs, lines, bytes"
        with cursor.copy(f"COPY tiny_agent_sessions ({columns}) FROM STDIN") as copy:
            for journal in sorted(directory.glob("*.jsonl")):
                session_id = journal.name.split("_", 1)[1][:-6]
                copy.write_row((session_id, session_id[-12:], 3, created, created, "/workspace", "openrouter", "test/model", "idle", 0, 1, 100))
    conn.close()
    list_sessions(directory)  # warm the file store's index

    def from_files() -> float:
        started = time.perf_counter()
        assert len(list_sessions(directory)) == count
        return time.perf_counter() - started

    def from_table() -> float:
        started = time.perf_counter()
        assert len(pg.listing()) >= count
        return time.perf_counter() - started

    return median_of(rounds, from_files), median_of(rounds, from_table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("TINY_AGENT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--facts", type=int, default=10_000, help="where the late append window is taken (default 10000)")
    parser.add_argument("--window", type=int, default=270, help="commits per append window (default 270)")
    parser.add_argument("--replay-facts", type=int, default=200_000, help="facts of the replayed session (default 200000)")
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions listed (default 10000)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    schema = f"tiny_agent_bench_{os.getpid()}"
    admin = psycopg.connect(args.url, autocommit=True)
    admin.execute(f'CREATE SCHEMA "{schema}"')
    joiner = "&" if "?" in args.url else "?"
    try:
        with tempfile.TemporaryDirectory() as directory:
            pg = PgStore(f"{args.url}{joiner}options=-csearch_path%3D{schema}")
            files = FileStore(Path(directory) / "sessions")
            times = append(pg, files, args.facts, args.window, args.rounds)
            print(f"append, fsync, {args.window} commits per window, median of {args.rounds}:")
            print(f"{'store':<10} {'µs/commit @100':>15} {f'µs/commit @{args.facts}':>17} {'late/early':>11}")
            for kind in ("file", "postgres"):
                early, late = times[(kind, "early")], times[(kind, "late")]
                print(f"{kind:<10} {early * 1e6:>15.0f} {late * 1e6:>17.0f} {late / early:>11.2f}")
            print(f"postgres/file: early {times[('postgres', 'early')] / times[('file', 'early')]:.2f}, "
                  f"late {times[('postgres', 'late')] / times[('file', 'late')]:.2f}")
            size, from_file, from_rows = replay(pg, files, args.replay_facts, args.rounds)
            print(f"replay of one {size / 1e6:.1f} MB session ({args.replay_facts} facts): file {size / from_file / 1e6:.1f} MB/s, "
                  f"postgres {size / from_rows / 1e6:.1f} MB/s, postgres/file time {from_rows / from_file:.2f}")
            listed_files, listed_rows = listing(PgStore(f"{args.url}{joiner}options=-csearch_path%3D{schema}"), Path(directory) / "many",
                                                args.sessions, args.rounds)
            print(f"listing {args.sessions} sessions: file store's warm index {listed_files * 1e3:.0f} ms, "
                  f"index table {listed_rows * 1e3:.0f} ms, postgres/file {listed_rows / listed_files:.2f}")
            pg.close()
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.close()


if __name__ == "__main__":
    main()
