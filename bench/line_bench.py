#!/usr/bin/env python3
"""One huge line: `audit` and settle-from-raw against `replay`, measured in one run.

    python bench/line_bench.py [--mb 200] [--repeat 3]

A provider answers with a body of about N MB (a long ``reasoning`` field, which
the seam drops, and a one-line answer), so the journal holds one raw line of
that size.  The run is written by the real driver on the in-memory provider.
Then, best of ``--repeat``:

- replay: read and reduce the journal (the baseline);
- audit: the whole audit, which re-derives the canonical message from the raw body;
- raw lookup: finding the raw fact by id, what `resume` does to settle from a
  stored response;
- refusal: the same journal with line 2 broken, so the checks that outrank a
  line's own error (UTF-8 and encoded surrogates) run over the huge line.

Target (issue 16): audit within 2x of replay; every step linear in the line length.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from builders import header  # noqa: E402
from fake_provider import FakeProvider, FakeReply  # noqa: E402

from tiny_agent.agent.configuration import Configuration  # noqa: E402
from tiny_agent.agent.loop import Driver, Policy, Runtime  # noqa: E402
from tiny_agent.agent.tools.toolbox import ToolBox  # noqa: E402
from tiny_agent.errors import CorruptionError  # noqa: E402
from tiny_agent.oversight.audit import audit  # noqa: E402
from tiny_agent.stores.files.disk import file_chunks  # noqa: E402
from tiny_agent.stores.journal import JournalWriter, find_raw_in, raw_facts, read_journal  # noqa: E402


def huge_body(megabytes: int) -> bytes:
    thinking = "the user wants one line; " * (megabytes * 1_000_000 // 25)
    message = {"role": "assistant", "content": "One line.", "reasoning": thinking}
    value = {
        "id": "gen-huge",
        "object": "chat.completion",
        "created": 1764700000,
        "model": "test/model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }
    return json.dumps(value, separators=(",", ":")).encode()


def write_session(directory: Path, megabytes: int) -> Path:
    workspace = directory / "work"
    workspace.mkdir()
    toolbox = ToolBox(workspace)
    configuration = Configuration(
        model="test/model",
        system_prompt="Be brief.",
        tools=[spec.declaration() for spec in toolbox.specs()],
        routing_identity="fake#test/model",
        environment_identity=str(workspace),
    )
    provider = FakeProvider([FakeReply(body=huge_body(megabytes))])
    runtime = Runtime(configuration, toolbox, lambda: provider, policy=Policy(stream=False))
    writer = JournalWriter.create(directory / "huge.jsonl", header(), durability="process")
    result = Driver(writer, runtime).run("Say one line.")
    writer.close()
    assert result.final == "One line.", result
    return writer.path


def refuse(path: Path) -> None:
    try:
        read_journal(path)
    except CorruptionError:
        return
    raise AssertionError("the broken journal was accepted")


def best(repeat: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = write_session(Path(directory), args.mb)
        longest = max(len(line) for line in path.read_bytes().split(b"\n"))
        print(f"journal {path.stat().st_size / 1e6:.1f} MB, longest line {longest / 1e6:.1f} MB", flush=True)
        ((_, fact),) = list(raw_facts(path))
        report = audit(path)
        assert not report.drift, report
        replay = best(args.repeat, lambda: read_journal(path))
        audited = best(args.repeat, lambda: audit(path))
        lookup = best(args.repeat, lambda: find_raw_in(file_chunks(path), fact.id))
        broken = Path(directory) / "broken.jsonl"
        data = path.read_bytes()
        second = data.index(b"\n") + 1
        broken.write_bytes(data[:second] + b"{" + data[second + 1 :])
        refused = best(args.repeat, lambda: refuse(broken))
        print(f"replay      {replay:7.2f} s   1.00x")
        print(f"audit       {audited:7.2f} s   {audited / replay:5.2f}x of replay   (target: within 2x)")
        print(f"raw lookup  {lookup:7.2f} s   {lookup / replay:5.2f}x of replay")
        print(f"refusal     {refused:7.2f} s   {refused / replay:5.2f}x of replay")


if __name__ == "__main__":
    main()
