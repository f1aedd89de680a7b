#!/usr/bin/env python3
"""Replay through a checkpoint against a full replay, measured in one run.

    python bench/checkpoint_bench.py [--sizes 100] [--tail 1] [--repeat 5] [--no-v3] [--gigabyte]

For each size it takes a generated session (the shared generator, cached under bench/out/, and
its sealed v3 copy, as bench/replay_bench.py makes them), puts all of it but its last ``--tail``
MB into a sessions directory, folds that once to leave a checkpoint, then appends the tail: a
long session that grew since it was last read.  Then, each in a fresh interpreter, in
interleaved rounds (best time, highest peak RSS):

- fold, full: ``read_journal`` (every line folded);
- fold, checkpoint: ``Checkpoints.read`` (the checkpoint checked and restored, the tail folded);
- replay --json, full / checkpoint: the command itself, start-up and output to /dev/null
  included (the journal named from outside the sessions directory has no checkpoint);

and prints the ratios checkpoint / full.  Peak RSS is the child's own high-water mark (VmHWM
for the fold modes, ``wait4``'s for the commands).  ``--gigabyte`` does the same with a 1 GB
journal (v2), in two rounds.  Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from replay_bench import OUT, ROOT, generate_v2, sealed_copy  # noqa: E402

CHILD = r"""
import gc, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from tiny_agent.stores.checkpoints import Checkpoints
from tiny_agent.stores.journal import read_journal
import tiny_agent.fold.snapshot

mode, path, directory = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
notes = []

def peak_rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")

gc.collect()
start = time.perf_counter()
if mode == "full":
    state = read_journal(path)
else:
    state = Checkpoints(directory, threshold=1 << 62, note=notes.append).read(path)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rss": peak_rss(), "facts": state.factCount, "notes": notes}))
"""


def fold_once(mode: str, path: Path, directory: Path) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path), str(directory), str(ROOT)], check=True, capture_output=True, text=True
    ).stdout
    result = json.loads(output)
    if result["notes"]:
        raise SystemExit(f"the checkpoint was not used: {result['notes']}")
    return result


COMMAND = r"""
import atexit, os, sys
def peak_rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                os.write(int(os.environ["PEAK_RSS_FD"]), line.split()[1].encode())
atexit.register(peak_rss)
sys.argv = ["tiny-agent", *sys.argv[1:]]
from tiny_agent.cli import main
main()
"""
"""``tiny-agent`` itself, writing its peak RSS to $PEAK_RSS_FD as it exits (``ru_maxrss`` would carry this script's over fork)."""


def replay_once(path: Path, directory: Path) -> dict:
    command = [sys.executable, "-c", COMMAND, "replay", str(path), "--json", "--sessions-dir", str(directory)]
    reading, writing = os.pipe()
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        env = {**os.environ, "PEAK_RSS_FD": str(writing)}
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE, cwd=ROOT, pass_fds=(writing,), env=env)
        os.close(writing)
        stderr = child.stderr.read().decode() if child.stderr else ""
        status = child.wait()
    seconds = time.perf_counter() - start
    with os.fdopen(reading, "rb") as report:
        peak = int(report.read() or 0) * 1024
    if status != 0 or stderr:
        raise SystemExit(f"replay failed ({status}): {stderr}")
    return {"seconds": seconds, "rss": peak}


def grown_session(source: Path, tail_bytes: int) -> tuple[Path, Path]:
    """A sessions directory holding ``source``, checkpointed before its last ``tail_bytes``; the journal's path."""
    work = OUT / f"checkpointed-{source.stem}"
    sessions = work / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes()
    header = json.loads(data[: data.index(b"\n")])
    path = sessions / f"20260101T000000Z_{header['id']}.jsonl"
    cut = data.rindex(b"\n", 0, len(data) - tail_bytes) + 1
    path.write_bytes(data[:cut])
    del data
    for stale in (sessions / ".tiny-agent-checkpoints").glob("*"):
        stale.unlink()
    env = {**os.environ, "TINY_AGENT_CHECKPOINT_BYTES": "0"}
    subprocess.run(
        [sys.executable, "-m", "tiny_agent", "replay", str(path), "--json", "--sessions-dir", str(sessions)],
        check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env,
    )
    with open(source, "rb") as whole, open(path, "ab") as grown:
        whole.seek(cut)
        while chunk := whole.read(1 << 20):
            grown.write(chunk)
    elsewhere = work / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    return path, sessions


def measure(source: Path, tail_mb: float, repeat: int) -> dict:
    path, sessions = grown_session(source, int(tail_mb * 1e6))
    elsewhere = sessions.parent / "elsewhere"
    runs = {
        "fold full": lambda: fold_once("full", path, elsewhere),
        "fold checkpoint": lambda: fold_once("checkpoint", path, sessions),
        "replay full": lambda: replay_once(path, elsewhere),
        "replay checkpoint": lambda: replay_once(path, sessions),
    }
    best: dict[str, dict] = {}
    for _ in range(repeat):
        for name, run in runs.items():
            result = run()
            if name not in best:
                best[name] = result
                continue
            best[name]["seconds"] = min(best[name]["seconds"], result["seconds"])
            best[name]["rss"] = max(best[name]["rss"], result["rss"])
    size = path.stat().st_size
    checkpoint = next((sessions / ".tiny-agent-checkpoints").iterdir()).stat().st_size
    return {
        "journal": source.name,
        "MB": round(size / 1e6, 1),
        "tail MB": tail_mb,
        "checkpoint MB": round(checkpoint / 1e6, 1),
        **{f"{name} s": round(result["seconds"], 3) for name, result in best.items()},
        "fold checkpoint / full": round(best["fold checkpoint"]["seconds"] / best["fold full"]["seconds"], 3),
        "replay checkpoint / full": round(best["replay checkpoint"]["seconds"] / best["replay full"]["seconds"], 3),
        **{f"{name} RSS / file": round(result["rss"] / size, 2) for name, result in best.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100", help="journal sizes in MB, before the tail (default 100)")
    parser.add_argument("--tail", type=float, default=1.0, help="MB appended after the checkpoint (default 1)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--no-v3", action="store_true", help="skip the sealed v3 copies")
    parser.add_argument("--gigabyte", action="store_true", help="also a 1 GB journal (v2), two rounds")
    arguments = parser.parse_args()
    jobs: list[tuple[Path, int]] = []
    for megabytes in (int(size) for size in arguments.sizes.split(",")):
        source = generate_v2(megabytes + max(1, round(arguments.tail)))
        jobs.append((source, arguments.repeat))
        if not arguments.no_v3:
            jobs.append((sealed_copy(source), arguments.repeat))
    if arguments.gigabyte:
        jobs.append((generate_v2(1000), 2))
    for source, repeat in jobs:
        print(json.dumps(measure(source, arguments.tail, repeat)), flush=True)


if __name__ == "__main__":
    main()
