#!/usr/bin/env python3
"""Peak memory where big inputs meet tiny-agent, each path in a fresh process (its VmHWM at exit).

    python bench/memory_bench.py [--bomb-mib 300] [--line-mb 20]
    python bench/memory_bench.py --replay 100,1000 [--repeat 2] [--baseline ROOT]
    python bench/memory_bench.py --outside 100,1000 [--repeat 2] [--baseline ROOT]

- ``verify`` of a journal holding one ``--line-mb`` MB tool result (it was a ``< 200 MB`` assertion in
  tests/test_oversight.py);
- ``run`` against a loopback server answering a gzip bomb (``--bomb-mib`` MiB of spaces, a few hundred KB
  compressed) at the default ``--max-response-bytes`` (64 MiB) and at 1 MiB: the body is cut at the cap,
  so the peak follows the cap, not the bomb (issue 22: 1.59 GB for 300 MiB before the cap);
- the same cap met by a plain body (no content encoding) of twice the cap.

With ``--outside SIZES`` it measures ``tiny-agent replay`` (text and ``--json``) of the generated journal of each size
(v2, and its sealed v3 copy up to 100 MB) named by a path outside the sessions directory, which has no checkpoint to
read or write (each replay folds the whole journal, its messages left in it: docs/performance.md), with the same
rounds and ``--baseline``, and says whether both codes printed the same bytes (SHA-256 of the output).

With ``--replay SIZES`` it measures ``tiny-agent replay`` (text, to /dev/null) instead: the generated session of
each size (MB), sealed and compacted by bench/longsession_bench.py, in a sessions directory where it has a
checkpoint (what a session that is read again has), and for reference the same session uncompacted, whose active
context is its whole transcript.  Time and peak RSS, best and highest of ``--repeat`` interleaved rounds; with
``--baseline ROOT`` the same replays by another checkout's code (e.g. ``git archive main | tar -x -C ROOT``),
each code with a checkpoint of its own (a checkpoint made by other code is not read).

Figures only, no thresholds: the machine is shared, so compare figures taken in the same run.
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from builders import RunWriter, new_writer  # noqa: E402
from replies import body as chat_body  # noqa: E402

from tiny_agent.loopback import LoopbackServer, Reply  # noqa: E402

MIB = 1024 * 1024
PROBE = """
import atexit, sys
def peak():
    kilobytes = next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM'))
    sys.stderr.write(f'\\nPEAK_KB {kilobytes}\\n')
atexit.register(peak)
from tiny_agent.cli import main
main(sys.argv[1:])
"""


REPLAY_PROBE = PROBE.replace("PEAK_KB {kilobytes}", 'PEAK_KB {kilobytes} CPU {sum(__import__("os").times()[:2]):.2f}')


def replay_peak(root: Path, journal: Path, *flags: str, **env: str) -> tuple[float, float, float, list[str]]:
    """``tiny-agent replay JOURNAL`` by the code at ``root``, its output thrown away: peak RSS MB, wall and CPU seconds,
    and what it said on stderr (a checkpoint it could not use says why)."""
    import time

    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", REPLAY_PROBE, "replay", str(journal), "--sessions-dir", str(journal.parent), *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(journal.parent), "PYTHONPATH": str(root), **env},
        cwd=root,  # `python -c` puts its working directory first on sys.path: it must hold the code measured
    )
    seconds = time.perf_counter() - started
    lines = done.stderr.strip().splitlines()
    if done.returncode != 0:
        raise SystemExit(f"replay of {journal} by {root} failed ({done.returncode}): {lines[-3:]}")
    figures = lines[-1].split()
    return int(figures[1]) / 1024, seconds, float(figures[3]), [line for line in lines[:-1] if line.strip()]


def replay_sessions(sizes: list[int], repeat: int, baseline: Path | None, uncompacted: list[int]) -> None:
    """Replay's time and peak RSS per size, compacted and not, this code and ``baseline``'s, each with its checkpoint."""
    import os
    import time

    sys.path.insert(0, str(ROOT / "bench"))
    from longsession_bench import Model, prepared
    from replay_bench import OUT, generate_v2, sealed_copy

    codes = {"after": ROOT} | ({"before": baseline.resolve()} if baseline is not None else {})
    print(f"load average at the start: {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    for size in sizes:
        made = sorted((OUT / f"longsession-{size}" / "sessions").glob("*.jsonl"))
        if made:
            compacted = made[0]
        else:
            with LoopbackServer(Model(), validate=False) as server:
                compacted, _ = prepared(size, server, reuse=False)
        kinds = [("compacted", compacted)]
        if size in uncompacted:
            kinds.append(("uncompacted", sealed_copy(generate_v2(size))))
        for kind, source in kinds:
            journals: dict[str, Path] = {}
            for name, root in codes.items():
                with open(source, "rb") as file:
                    session_id = file.readline().split(b'"id":"', 1)[1][:36].decode()
                journal = OUT / f"replay-{size}-{kind}-{name}" / f"20260101T000000Z_{session_id}.jsonl"
                journal.parent.mkdir(parents=True, exist_ok=True)
                if not journal.exists():
                    os.link(source, journal)
                if not list((journal.parent / ".tiny-agent-checkpoints").glob("*.checkpoint")):
                    # Leaves its checkpoint (a stale one is noted by the timed replays); --messages prints only the context.
                    replay_peak(root, journal, "--messages", TINY_AGENT_CHECKPOINT_BYTES="0")
                    print(f"  {journal.parent.name}: checkpointed", flush=True)
                journals[name] = journal
            best: dict[str, list[float]] = {}
            for _ in range(repeat):
                for name, journal in journals.items():
                    peak, seconds, cpu, said = replay_peak(codes[name], journal)
                    for line in said:
                        print(f"  {name} said: {line}")
                    figures = best.setdefault(name, [seconds, cpu, peak])
                    figures[:] = min(figures[0], seconds), min(figures[1], cpu), max(figures[2], peak)
            megabytes = source.stat().st_size / 1e6
            for name, (seconds, cpu, peak) in best.items():
                print(f"replay, {megabytes:,.0f} MB {kind}, {name}: {seconds:.2f} s ({cpu:.2f} s CPU), peak RSS {peak:,.1f} MB")
    print(f"load average at the end: {' '.join(f'{load:.1f}' for load in os.getloadavg())} · {time.strftime('%H:%M')}")


def replay_outside(sizes: list[int], repeat: int, baseline: Path | None) -> None:
    """Replay (text and ``--json``) of the generated journals (v2, and its sealed v3 copy up to 100 MB) named by a path
    outside the sessions directory: no checkpoint to read or write, so every replay folds the whole journal."""
    import hashlib
    import os
    import time

    sys.path.insert(0, str(ROOT / "bench"))
    from replay_bench import generate_v2, sealed_copy

    codes = {"after": ROOT} | ({"before": baseline.resolve()} if baseline is not None else {})
    print(f"load average at the start: {' '.join(f'{load:.1f}' for load in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as empty:
        for size in sizes:
            v2 = generate_v2(size)
            journals = [v2, sealed_copy(v2)] if size <= 100 else [v2]
            for journal, flags in [(journal, flags) for journal in journals for flags in ((), ("--json",))]:
                best: dict[str, list[float]] = {}
                outputs: dict[str, str] = {}
                for _ in range(repeat):
                    for name, root in codes.items():
                        with tempfile.TemporaryFile() as out:
                            peak, seconds, cpu = _replay_to(root, journal, Path(empty), out, *flags)
                            out.seek(0)
                            digest = hashlib.sha256()
                            while chunk := out.read(1 << 20):
                                digest.update(chunk)
                        outputs.setdefault(name, digest.hexdigest())
                        figures = best.setdefault(name, [seconds, cpu, peak])
                        figures[:] = min(figures[0], seconds), min(figures[1], cpu), max(figures[2], peak)
                what = f"replay {' '.join(flags)}".strip() + f", {journal.stat().st_size / 1e6:,.0f} MB {journal.name[-8:-6]}"
                for name, (seconds, cpu, peak) in best.items():
                    print(f"{what}, {name}: {seconds:.2f} s ({cpu:.2f} s CPU), peak RSS {peak:,.1f} MB")
                if "before" in best:
                    ratios = [best["after"][index] / best["before"][index] for index in range(3)]
                    same = "the same bytes" if len(set(outputs.values())) == 1 else "DIFFERENT OUTPUTS"
                    print(f"{what}, after / before: time {ratios[0]:.2f}, CPU {ratios[1]:.2f}, peak RSS {ratios[2]:.2f}; {same}")
    print(f"load average at the end: {' '.join(f'{load:.1f}' for load in os.getloadavg())} · {time.strftime('%H:%M')}")


def _replay_to(root: Path, journal: Path, sessions: Path, out: object, *flags: str) -> tuple[float, float, float]:
    """``tiny-agent replay JOURNAL`` by the code at ``root`` with ``sessions`` as the sessions directory, its output into
    ``out``: peak RSS MB, wall and CPU seconds."""
    import time

    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", REPLAY_PROBE, "replay", str(journal), "--sessions-dir", str(sessions), *flags],
        stdout=out,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(sessions), "PYTHONPATH": str(root)},
        cwd=root,
    )
    seconds = time.perf_counter() - started
    lines = done.stderr.strip().splitlines()
    if done.returncode != 0:
        raise SystemExit(f"replay of {journal} by {root} failed ({done.returncode}): {lines[-3:]}")
    figures = lines[-1].split()
    return int(figures[1]) / 1024, seconds, float(figures[3])


def peak_of(*args: str, cwd: Path) -> tuple[int, float, str]:
    """Exit code, peak resident memory in MB, and the last line of stderr before the figure."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd, env=_env(cwd))
    lines = done.stderr.strip().splitlines()
    kilobytes = int(lines[-1].split()[1])
    said = next((line for line in reversed(lines[:-1]) if line.strip()), "")
    return done.returncode, kilobytes / 1024, said


def _env(cwd: Path) -> dict[str, str]:
    import os

    env = {key: value for key, value in os.environ.items() if not key.startswith("TINY_AGENT_") and not key.endswith("_API_KEY")}
    return {**env, "PYTHONPATH": str(ROOT), "TINY_AGENT_SESSIONS_DIR": str(cwd / "sessions"), "XDG_CONFIG_HOME": str(cwd)}


def verify_big_line(root: Path, megabytes: int) -> None:
    store = root / "store"
    store.mkdir()
    path = store / "20260101T000000Z_01a2383b-1b4f-7d4f-bcb5-ea6b3b985201.jsonl"
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("read the big file")
    run.attempt()
    asked = run.call_tools([("read", '{"path":"big.log"}')])
    run.run_tool(asked, 0, "x" * (megabytes * 1_000_000))
    writer.close()
    code, peak, _ = peak_of("verify", str(path), cwd=root)
    print(f"verify, one {megabytes} MB line ({path.stat().st_size / 1e6:.0f} MB journal): exit {code}, peak {peak:.0f} MB")


def run_against(root: Path, label: str, reply: Reply, *flags: str) -> None:
    work = root / label.replace(" ", "-")
    work.mkdir()
    with LoopbackServer([reply]) as server:
        code, peak, said = peak_of("run", "hi", "--base-url", server.base_url, "--model", "m", "--retries", "1", "--no-stream", *flags, cwd=work)
    journal = sum(path.stat().st_size for path in (work / "sessions").glob("*.jsonl"))
    print(f"{label}: exit {code}, peak {peak:.0f} MB, journal {journal / 1e6:.1f} MB")
    print(f"  {said[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-mib", type=int, default=300, help="what the gzip bomb expands to (default 300)")
    parser.add_argument("--line-mb", type=int, default=20, help="the tool result line verify reads (default 20)")
    parser.add_argument("--replay", help="measure replay of the generated sessions of these sizes (MB) instead")
    parser.add_argument("--repeat", type=int, default=2, help="--replay: interleaved rounds (default 2)")
    parser.add_argument("--baseline", type=Path, help="--replay: also by the code of this checkout (before/after)")
    parser.add_argument("--uncompacted", default="", help="--replay: also the uncompacted sessions of these sizes")
    parser.add_argument("--outside", help="measure replay of the generated journals of these sizes (MB), outside the sessions dir")
    args = parser.parse_args()
    if args.outside:
        replay_outside([int(size) for size in args.outside.split(",")], args.repeat, args.baseline)
        return
    if args.replay:
        sizes = [int(size) for size in args.replay.split(",")]
        replay_sessions(sizes, args.repeat, args.baseline, [int(size) for size in args.uncompacted.split(",") if size])
        return
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        verify_big_line(root, args.line_mb)
        baseline = Reply(body=chat_body({"role": "assistant", "content": "ok"}))
        run_against(root, "run, a small answer (baseline)", baseline)
        bomb = gzip.compress(b" " * (args.bomb_mib * MIB), 9)
        gzipped = Reply(body=bomb, headers={"Content-Encoding": "gzip"})
        print(f"the bomb: {len(bomb) / 1e3:.0f} KB of gzip, {args.bomb_mib} MiB decoded")
        run_against(root, "run, the bomb, default cap", gzipped)
        run_against(root, "run, the bomb, 1 MiB cap", gzipped, "--max-response-bytes", str(MIB))
        plain = Reply(body=b" " * (128 * MIB))
        run_against(root, "run, 128 MiB plain, default cap", plain)


if __name__ == "__main__":
    main()
