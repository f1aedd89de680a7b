#!/usr/bin/env python3
"""Replay throughput against a bare msgspec decode of the same bytes, measured in one run.

    python bench/replay_bench.py [--sizes 10,100] [--repeat 5] [--journal PATH ...] [--baseline ROOT]

For each size it generates a valid session v2 journal with the shared
generator (../shared/bench/gen_v2_session.py, cached under bench/out/) and a
sealed v3 copy of it, then measures, each in a fresh interpreter:

- replay: ``tiny_agent.stores.journal.read_journal`` (full validation and fold);
- bare decode, keep: read the file in the same chunks, split lines, decode
  every line with msgspec and keep the values (what any reader that rebuilds
  state must at least do) -- the baseline of the target ratio.  The cyclic
  GC is paused while it runs, exactly as replay pauses it (journal.py):
  with the GC on, the baseline slows down on big heaps (rescanning what it
  keeps) and the ratio would flatter replay;
- bare decode, discard: the same, dropping each value at once (pure parse
  speed, shown for reference);
- with ``--baseline ROOT``: replay again with the ``tiny_agent`` of another
  checkout (e.g. ``git archive <commit> | tar -x -C ROOT``), in the same
  interleaved rounds: a before/after comparison that one noisy spell cannot
  skew;
- peak RSS of the replay process: the kernel's high-water mark of the
  process's own address space (VmHWM).  ``ru_maxrss`` is not used: on Linux
  it carries the parent's resident set over fork/exec, so a child of a big
  parent (this script after generating a journal) reports the parent's size.

With ``--cpu`` every time is the child's CPU time instead of the wall clock:
on a machine other processes keep busy, waiting for a core no longer counts
(the cache and memory bandwidth they share still do).

Machines are noisy (and this one is shared): the modes run in interleaved
rounds -- replay, keep, discard, replay, keep, ... -- each in a fresh
interpreter, so a slow spell hits every mode alike; every time is the best of
``--repeat`` rounds, peak RSS the highest, and ratios only compare figures
taken in the same run.  Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
SHARED = Path(os.environ.get("TINY_AGENT_SHARED", ROOT.parent / "shared"))
GENERATOR = SHARED / "bench" / "gen_v2_session.py"
RUNS_PER_MB = 95

CHILD = r"""
import gc, json, sys, time
import msgspec
sys.path.insert(0, sys.argv[3])
from tiny_agent.stores.journal import read_journal

path, mode = sys.argv[1], sys.argv[2]

def chunked_lines(file):
    rest = b""
    while True:
        chunk = file.read(1 << 20)
        if not chunk:
            return
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from lines

def bare(keep):
    decode = msgspec.json.Decoder().decode
    kept = []
    gc.disable()
    try:
        with open(path, "rb") as file:
            for line in chunked_lines(file):
                value = decode(line)
                if keep:
                    kept.append(value)
    finally:
        gc.enable()
    return len(kept)

def peak_rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")

def replay():
    return read_journal(path).factCount

work = {"replay": replay, "keep": lambda: bare(True), "discard": lambda: bare(False)}[mode]
gc.collect()
start = time.perf_counter()
cpu_start = time.process_time()
result = work()
cpu = time.process_time() - cpu_start
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "cpu": cpu, "facts": result if mode == "replay" else None, "rss": peak_rss()}))
"""


MODES = ("replay", "keep", "discard")


def measure_once(path: Path, mode: str, root: Path = ROOT) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), mode, str(root)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output)


def measure(path: Path, repeat: int, baseline: Path | None = None, cpu: bool = False) -> dict[str, dict]:
    """Best time (and highest peak RSS) of each mode over interleaved rounds."""
    best: dict[str, dict] = {}
    runs = [(mode, mode, ROOT) for mode in MODES]
    if baseline is not None:
        runs.insert(1, ("baseline", "replay", baseline))
    for _ in range(repeat):
        for name, mode, root in runs:
            result = measure_once(path, mode, root)
            if cpu:
                result["seconds"] = result["cpu"]
            if name not in best:
                best[name] = result
                continue
            best[name]["seconds"] = min(best[name]["seconds"], result["seconds"])
            best[name]["rss"] = max(best[name]["rss"], result["rss"])
    return best


def generate_v2(megabytes: int) -> Path:
    OUT.mkdir(exist_ok=True)
    path = OUT / f"session-{megabytes}mb-v2.jsonl"
    if not path.exists():
        runs = max(1, megabytes * RUNS_PER_MB)
        subprocess.run(
            [sys.executable, str(GENERATOR), str(path), "--runs", str(runs), "--seed", "1"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return path


def sealed_copy(source: Path) -> Path:
    """The same session as a v3 journal: header version 3, every line sealed, seqs renumbered."""
    target = source.with_name(source.name.replace("-v2", "-v3"))
    if target.exists():
        return target
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    lines = source.read_bytes()[:-1].split(b"\n")
    header = json.loads(lines[0])
    header["version"] = 3
    head = dumps(header).encode()
    chain = hashlib.sha256(head + b"\n").digest()
    seq = 0
    seal_number = 0
    with open(target, "wb") as out:
        out.write(head + b"\n")
        for line in lines[1:]:
            value = json.loads(line)
            facts = value if isinstance(value, list) else [value]
            for fact in facts:
                seq += 1
                fact["seq"] = seq
            seq += 1
            seal_number += 1
            seal_id = f"01900000-0000-7000-8000-{seal_number:012x}"
            facts.append({"kind": "seal", "seq": seq, "id": seal_id, "timestamp": facts[-1]["timestamp"],
                          "chain": "sha256:" + chain.hex()})
            encoded = dumps(facts).encode()
            out.write(encoded + b"\n")
            chain = hashlib.sha256(chain + encoded + b"\n").digest()
    return target


def report(path: Path, repeat: int, baseline: Path | None, cpu: bool) -> dict:
    size = path.stat().st_size
    results = measure(path, repeat, baseline, cpu)
    replay, keep, discard = results["replay"], results["keep"], results["discard"]
    megabytes = size / 1e6
    row = {
        "journal": path.name,
        "MB": round(megabytes, 1),
        "facts": replay["facts"],
        "replay MB/s": round(megabytes / replay["seconds"], 1),
        "replay facts/s": round(replay["facts"] / replay["seconds"]),
        "us/fact": round(replay["seconds"] / replay["facts"] * 1e6, 2),
        "bare keep MB/s": round(megabytes / keep["seconds"], 1),
        "bare discard MB/s": round(megabytes / discard["seconds"], 1),
        "ratio (vs keep)": round(keep["seconds"] / replay["seconds"], 2),
        "ratio (vs discard)": round(discard["seconds"] / replay["seconds"], 2),
        "peak RSS MB": round(replay["rss"] / 1e6, 1),
        "RSS / file": round(replay["rss"] / size, 2),
    }
    if "baseline" in results:
        before = results["baseline"]
        row["baseline MB/s"] = round(megabytes / before["seconds"], 1)
        row["baseline ratio (vs keep)"] = round(keep["seconds"] / before["seconds"], 2)
        row["baseline RSS MB"] = round(before["rss"] / 1e6, 1)
        row["replay / baseline speed"] = round(before["seconds"] / replay["seconds"], 3)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100", help="journal sizes in MB (default 10,100)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--journal", action="append", type=Path, default=[], help="measure these files instead")
    parser.add_argument("--no-v3", action="store_true", help="skip the sealed v3 copies")
    parser.add_argument(
        "--baseline", type=Path, help="also replay with the tiny_agent of this checkout, interleaved (before/after)"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="time by the child's CPU time, not the wall clock (for a busy machine)"
    )
    args = parser.parse_args()
    journals = list(args.journal)
    if not journals:
        for size in (int(part) for part in args.sizes.split(",")):
            v2 = generate_v2(size)
            journals.append(v2)
            if not args.no_v3:
                journals.append(sealed_copy(v2))
    started = time.time()
    rows = [report(path, args.repeat, args.baseline, args.cpu) for path in journals]
    columns = list(rows[0])
    widths = {column: max(len(column), *(len(str(row[column])) for row in rows)) for column in columns}
    print("  ".join(column.rjust(widths[column]) for column in columns))
    for row in rows:
        print("  ".join(str(row[column]).rjust(widths[column]) for column in columns))
    by_version: dict[str, list[dict]] = {}
    for row in rows:
        by_version.setdefault(row["journal"].rsplit("-", 1)[-1], []).append(row)
    for version, group in sorted(by_version.items()):
        if len(group) >= 2:
            small, large = group[0], group[-1]
            print(f"{version}: time per fact {large['MB']} MB vs {small['MB']} MB: "
                  f"{large['us/fact'] / small['us/fact']:.2f}x (flat = 1.00)")
    print(f"python {sys.version.split()[0]} · {os.cpu_count()} cpus · {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
