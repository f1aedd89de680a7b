#!/usr/bin/env python3
"""`tiny-agent view` against `replay` on the same big journals, measured in one run.

    python bench/view_bench.py [--sizes 10,100] [--repeat 3] [--journal PATH ...]

For each size it generates a valid session v2 journal with the shared
generator (../shared/bench/gen_v2_session.py, cached under bench/out/, the
same files bench/replay_bench.py uses), then measures, each in a fresh
interpreter and in interleaved rounds (best time of ``--repeat``, highest
peak RSS):

- fold: ``read_journal`` (validation and the fold: the floor of any reader);
- replay: what ``tiny-agent replay`` does: the fold, then the transcript and
  footer as text (written to /dev/null);
- view: what ``tiny-agent view -o FILE`` does: audit (a fold and a pass over
  every fact, every stored response re-derived), verify (a fold), the view's
  own pass over the facts, and the page (written to a file).

It prints the ratios view / replay and view / fold, the page's size (bounded:
the first and last attempts in full, the rest folded), and peak RSS.  Nothing
here is a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from replay_bench import ROOT, generate_v2  # noqa: E402

CHILD = r"""
import contextlib, json, os, sys, time
sys.path.insert(0, sys.argv[4])
from pathlib import Path
from tiny_agent.stores.journal import read_journal

path, mode, page = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

def fold():
    read_journal(path)
    return 0

def replay():
    from tiny_agent.cli.looking import print_human
    state = read_journal(path)
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        print_human(state, path)
    return 0

def view():
    from tiny_agent.view.model import build_view
    from tiny_agent.view.session_page import session_page
    data = session_page(build_view(path, handle="", prices={})).encode("utf-8")
    page.write_bytes(data)
    return len(data)

def peak_rss():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")

work = {"fold": fold, "replay": replay, "view": view}[mode]
if mode == "view":  # import the view's modules before the clock starts, as the others' are
    import tiny_agent.view.model, tiny_agent.view.session_page  # noqa: F401
if mode == "replay":
    import tiny_agent.cli.looking  # noqa: F401
started = time.perf_counter()
size = work()
print(json.dumps({"seconds": time.perf_counter() - started, "page": size, "rss": peak_rss()}))
"""

MODES = ("fold", "replay", "view")


def measure_once(path: Path, mode: str, page: Path) -> dict:
    command = [sys.executable, "-c", CHILD, str(path), mode, str(page), str(ROOT)]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def measure(path: Path, repeat: int) -> dict[str, dict]:
    best: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as directory:
        page = Path(directory) / "page.html"
        for _ in range(repeat):
            for mode in MODES:
                result = measure_once(path, mode, page)
                if mode not in best:
                    best[mode] = result
                    continue
                best[mode]["seconds"] = min(best[mode]["seconds"], result["seconds"])
                best[mode]["rss"] = max(best[mode]["rss"], result["rss"])
    return best


def report(path: Path, repeat: int) -> dict:
    size = path.stat().st_size
    results = measure(path, repeat)
    fold, replay, view = results["fold"], results["replay"], results["view"]
    return {
        "journal": path.name,
        "MB": round(size / 1e6, 1),
        "fold s": round(fold["seconds"], 3),
        "replay s": round(replay["seconds"], 3),
        "view s": round(view["seconds"], 3),
        "view/replay": round(view["seconds"] / replay["seconds"], 2),
        "view/fold": round(view["seconds"] / fold["seconds"], 2),
        "page MB": round(view["page"] / 1e6, 2),
        "replay RSS MB": round(replay["rss"] / 1e6, 1),
        "view RSS MB": round(view["rss"] / 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100", help="journal sizes in MB (default 10,100)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--journal", action="append", type=Path, default=[], help="measure these files instead")
    args = parser.parse_args()
    journals = list(args.journal) or [generate_v2(int(size)) for size in args.sizes.split(",")]
    started = time.time()
    rows = [report(path, args.repeat) for path in journals]
    columns = list(rows[0])
    widths = {column: max(len(column), *(len(str(row[column])) for row in rows)) for column in columns}
    print("  ".join(column.rjust(widths[column]) for column in columns))
    for row in rows:
        print("  ".join(str(row[column]).rjust(widths[column]) for column in columns))
    print(f"python {sys.version.split()[0]} · {os.cpu_count()} cpus · {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
