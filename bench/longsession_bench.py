#!/usr/bin/env python3
"""The next turn of a long compacted session against that of a small one, measured in one run.

    python bench/longsession_bench.py [--sizes 1,100] [--repeat 3] [--no-tail] [--baseline ROOT]

For each size it takes a generated session (the shared generator, cached under bench/out/, sealed as
v3 by bench/replay_bench.py), compacts it with ``tiny-agent compact`` against a loopback server
(one summary, the newest turns kept; the summary request, which is not journaled, is cut to the first
message, so that a 1 GB history need not be sent), and folds it once to leave a checkpoint.  Then, in rounds
interleaving the sizes (best time, highest peak RSS):

- next turn: ``tiny-agent run --session S PROMPT`` from the process's start to the loopback's receipt
  of its first request (start-up, opening the session, building the request), and the command's peak RSS;

and after a 1% tail of further turns (``run --session`` with a 20 KB prompt) is appended past a fresh
checkpoint, each in a fresh interpreter:

- fold full: ``read_journal`` (every line folded);
- fold lean: ``Checkpoints.fold(lean=True)``, what the commands that write the next turn do;
- fold whole: ``Checkpoints.fold()``, what replay and audit do (the whole state restored).

With ``--baseline ROOT`` the next turn is also timed with the ``tiny_agent`` of another checkout (before/after),
in the same rounds, on a copy of each compacted session checkpointed by that code (a checkpoint made by other code
is not read).

It prints each size's figures and the ratios the targets name (issue 26).  Nothing here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from checkpoint_bench import COMMAND  # noqa: E402
from replay_bench import OUT, ROOT, generate_v2, sealed_copy  # noqa: E402

from tiny_agent.loopback import Answer, Reply, whole_body  # noqa: E402
from tiny_agent.loopback.server import LoopbackServer  # noqa: E402

CACHED = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
CACHED["PYTHONPYCACHEPREFIX"] = str(OUT / "bytecode")
"""Children run with bytecode cached, as after an install (bench/startup_bench.py measures the other case)."""

CHILD = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from tiny_agent.stores.checkpoints import Checkpoints
from tiny_agent.stores.journal import read_journal
import tiny_agent.fold.snapshot

mode, path, directory = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
notes = []
start = time.perf_counter()
if mode == "full":
    facts = read_journal(path).factCount
else:
    facts = Checkpoints(directory, threshold=1 << 62, note=notes.append).fold(path, lean=mode == "lean").state.factCount
seconds = time.perf_counter() - start
with open("/proc/self/status") as status:
    rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "rss": rss, "facts": facts, "notes": notes}))
"""


COMPACT = r"""
import sys
from tiny_agent.agent import compaction
real = compaction.summary_messages
# The summary request is not journaled: sending the first message alone keeps a 1 GB history out of the request.
compaction.summary_messages = lambda context, retained, guidance, elide: real(context[:1], 0, guidance, elide)
sys.argv = ["tiny-agent", *sys.argv[1:]]
from tiny_agent.cli import main
main()
"""


class Model:
    """Answers every request at once; notes when the first request of the current command arrived."""

    def __init__(self) -> None:
        self.arrived: float | None = None
        self.lock = threading.Lock()

    def __call__(self, body: object) -> Reply:
        with self.lock:
            if self.arrived is None:
                self.arrived = time.perf_counter()
        return Reply(body=whole_body("chat", Answer(text="Noted.")))


def tiny_agent(server: LoopbackServer, *words: str, sessions: Path) -> list[str]:
    base = ["--base-url", server.base_url, "--model", "m", "--durability", "process", "--no-stream", "--retries", "0"]
    return [sys.executable, "-c", COMMAND, *words, *base, "--sessions-dir", str(sessions)]


def run(command: list[str], env: dict[str, str] | None = None, root: Path = ROOT) -> None:
    """Run a child in ``root``, so that it imports that checkout's ``tiny_agent``."""
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, env={**CACHED, **(env or {}), "PEAK_RSS_FD": "2"})
    if done.returncode != 0:
        raise SystemExit(f"{command[3:5]} failed ({done.returncode}): {done.stderr[-2000:]}")


def prepared(megabytes: int, server: LoopbackServer, reuse: bool) -> tuple[Path, Path]:
    """A compacted copy of the generated session in a sessions directory of its own, with a checkpoint."""
    sessions = OUT / f"longsession-{megabytes}" / "sessions"
    compacted = sorted(sessions.glob("*.jsonl"))
    if reuse and compacted:
        checkpoint(compacted[0], sessions)
        return compacted[0], sessions
    source = sealed_copy(generate_v2(megabytes))
    shutil.rmtree(sessions.parent, ignore_errors=True)
    sessions.mkdir(parents=True)
    with open(source, "rb") as lines:
        session_id = json.loads(lines.readline())["id"]
    path = sessions / f"20260101T000000Z_{session_id}.jsonl"
    shutil.copyfile(source, path)
    run([sys.executable, "-c", COMPACT, *tiny_agent(server, "compact", str(path), sessions=sessions)[3:]])
    checkpoint(path, sessions)
    return path, sessions


CHECKPOINT = r"""
import sys
from pathlib import Path
from tiny_agent.stores.checkpoints import Checkpoints
Checkpoints(Path(sys.argv[2]), threshold=0).fold(Path(sys.argv[1]))
"""
"""A whole fold that leaves a fresh checkpoint (``replay`` would also render a 1 GB transcript nobody reads)."""


def checkpoint(path: Path, sessions: Path, root: Path = ROOT) -> None:
    run([sys.executable, "-c", CHECKPOINT, str(path), str(sessions)], root=root)


def baseline_copy(megabytes: int, path: Path, root: Path) -> tuple[Path, Path]:
    """A copy of the compacted session for the baseline's code, with that code's checkpoint."""
    sessions = OUT / f"longsession-{megabytes}-baseline" / "sessions"
    shutil.rmtree(sessions.parent, ignore_errors=True)
    sessions.mkdir(parents=True)
    shutil.copyfile(path, sessions / path.name)
    checkpoint(sessions / path.name, sessions, root)
    return sessions / path.name, sessions


def next_turn(server: LoopbackServer, model: Model, path: Path, sessions: Path, root: Path = ROOT) -> dict[str, float]:
    command = tiny_agent(server, "run", "--session", str(path), "One more thing?", sessions=sessions)
    reading, writing = os.pipe()
    model.arrived = None
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE, cwd=root, pass_fds=(writing,),
                                 env={**CACHED, "PEAK_RSS_FD": str(writing)})
        os.close(writing)
        stderr = child.stderr.read().decode() if child.stderr else ""
        status = child.wait()
    with os.fdopen(reading, "rb") as report:
        peak = int(report.read() or 0) * 1024
    if status != 0 or model.arrived is None or "checkpoint" in stderr:
        raise SystemExit(f"run --session failed ({status}) or did not use the checkpoint: {stderr}")
    return {"seconds": model.arrived - start, "rss": peak}


def fold_once(mode: str, path: Path, sessions: Path) -> dict[str, float]:
    where = sessions if mode != "full" else sessions.parent
    output = subprocess.run([sys.executable, "-c", CHILD, mode, str(path), str(where), str(ROOT)],
                            check=True, capture_output=True, text=True, env=CACHED).stdout
    result = json.loads(output)
    if result["notes"]:
        raise SystemExit(f"the checkpoint was not used: {result['notes']}")
    return result


def best_of(runs: dict[object, object], repeat: int) -> dict[object, dict[str, float]]:
    best: dict[object, dict[str, float]] = {}
    for _ in range(repeat):
        for name, once in runs.items():
            result = once()  # type: ignore[operator]
            if name not in best:
                best[name] = dict(result)
            best[name]["seconds"] = min(best[name]["seconds"], result["seconds"])
            best[name]["rss"] = max(best[name]["rss"], result["rss"])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,100", help="session sizes in MB; the first is the baseline (default 1,100)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--no-tail", action="store_true", help="the next turn only (no 1%% tail, no folds)")
    parser.add_argument("--reuse", action="store_true", help="reuse the compacted sessions of an earlier run")
    parser.add_argument("--baseline", type=Path, help="also time the next turn with the tiny_agent of this checkout (before/after)")
    arguments = parser.parse_args()
    sizes = [int(size) for size in arguments.sizes.split(",")]
    model = Model()
    with LoopbackServer(model, validate=False) as server:
        sessions = {size: prepared(size, server, arguments.reuse) for size in sizes}
        roots = {"": ROOT} if arguments.baseline is None else {"": ROOT, "baseline ": arguments.baseline.resolve()}
        copies = {(size, label): sessions[size] if root == ROOT else baseline_copy(size, sessions[size][0], root)
                  for size in sizes for label, root in roots.items()}
        turns = best_of({(size, label): (lambda size=size, label=label, root=root: next_turn(server, model, *copies[size, label], root))
                         for size in sizes for label, root in roots.items()}, arguments.repeat)
        for size in sizes:
            path, directory = sessions[size]
            figures: dict[str, float] = {"MB": round(path.stat().st_size / 1e6, 1)}
            for label in roots:
                turn, base = turns[size, label], turns[sizes[0], label]["seconds"]
                figures |= {f"{label}next turn s": round(turn["seconds"], 3),
                            f"{label}next turn / {sizes[0]} MB": round(turn["seconds"] / base, 2),
                            f"{label}next turn peak RSS MB": round(turn["rss"] / 1e6, 1)}
            if arguments.baseline is not None:
                figures["next turn / baseline"] = round(turns[size, ""]["seconds"] / turns[size, "baseline "]["seconds"], 3)
            figures["load average"] = round(os.getloadavg()[0], 1)
            if arguments.no_tail:
                print(json.dumps({"size": size, **figures}), flush=True)
                continue
            checkpoint(path, directory)
            for _ in range(max(1, round(path.stat().st_size * 0.01 / 25_000))):
                run(tiny_agent(server, "run", "--session", str(path), "More words. " * 1700, sessions=directory))
            folds = best_of({mode: (lambda mode=mode, path=path, where=directory: fold_once(mode, path, where)) for mode in ("full", "lean", "whole")},
                            arguments.repeat)
            figures |= {f"fold {mode} s": round(result["seconds"], 3) for mode, result in folds.items()}
            figures |= {f"fold {mode} / full": round(folds[mode]["seconds"] / folds["full"]["seconds"], 3) for mode in ("lean", "whole")}
            figures |= {f"fold {mode} peak RSS MB": round(result["rss"] / 1e6, 1) for mode, result in folds.items()}
            print(json.dumps({"size": size, **figures}), flush=True)


if __name__ == "__main__":
    main()
