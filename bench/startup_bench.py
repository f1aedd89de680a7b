#!/usr/bin/env python3
"""Start-up: ``tiny-agent sessions`` and ``tiny-agent replay`` of a tiny journal against ``python -c "import msgspec"``.

    python bench/startup_bench.py [--repeat 20]

Each command runs as a user runs it (the ``tiny-agent`` console script of this interpreter's
environment) on a sessions directory holding one small session (its index already warm), in
interleaved rounds; the best and the median wall time of each are printed with their ratios to
the baseline, a bare interpreter importing msgspec.  For reference it also runs the same two
commands through typer (``tiny_agent.cli.app.main``, the path the lean one bypasses).

Two settings, both measured: ``cached`` -- compiled bytecode available, as after a normal
install (a private ``PYTHONPYCACHEPREFIX``, warmed first) -- and ``source`` -- every module of
tiny_agent compiled at each start, as under ``PYTHONDONTWRITEBYTECODE=1`` in an editable
checkout (site-packages keep their installed bytecode either way).  Nothing here is a pass/fail
test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SESSION = ROOT / "sessions" / "examples" / "tool-run.jsonl"
TYPER_MAIN = "import sys; from tiny_agent.cli.app import main; sys.argv[0] = 'tiny-agent'; main()"


def commands(sessions: Path, journal: Path) -> dict[str, list[str]]:
    script = Path(sys.executable).with_name("tiny-agent")
    if not script.exists():
        raise SystemExit(f"no console script at {script}: pip install -e . first")
    where = ["--sessions-dir", str(sessions)]
    return {
        "import msgspec": [sys.executable, "-c", "import msgspec"],
        "sessions": [str(script), "sessions", "--all", *where],
        "replay": [str(script), "replay", str(journal), *where],
        "sessions (typer)": [sys.executable, "-c", TYPER_MAIN, "sessions", "--all", *where],
        "replay (typer)": [sys.executable, "-c", TYPER_MAIN, "replay", str(journal), *where],
    }


def run(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    return time.perf_counter() - start


def measure(setting: str, runs: dict[str, list[str]], env: dict[str, str], repeat: int) -> None:
    for command in runs.values():  # warm the page cache (and, cached, the bytecode)
        run(command, env)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, command in runs.items():
            times[name].append(run(command, env))
    baseline = min(times["import msgspec"])
    for name, seconds in times.items():
        best = min(seconds)
        row = {
            "setting": setting,
            "command": name,
            "best ms": round(best * 1000, 1),
            "median ms": round(statistics.median(seconds) * 1000, 1),
            "best / import msgspec": round(best / baseline, 2),
        }
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20, help="interleaved rounds (default 20)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tiny-agent-startup-") as scratch:
        sessions = Path(scratch) / "sessions"
        sessions.mkdir()
        header = json.loads(SESSION.read_bytes().split(b"\n", 1)[0])
        journal = sessions / f"20260101T000000Z_{header['id']}.jsonl"
        shutil.copyfile(SESSION, journal)
        runs = commands(sessions, journal)
        cached = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "bytecode")
        measure("cached", runs, cached, arguments.repeat)
        source = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        source.pop("PYTHONPYCACHEPREFIX", None)
        measure("source", runs, source, arguments.repeat)


if __name__ == "__main__":
    main()
