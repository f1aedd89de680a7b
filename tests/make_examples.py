"""Regenerate sessions/examples: a few small journals, valid and broken, that the README and docs use.

    python tests/make_examples.py

Each example's expected replay outcome is in sessions/examples/manifest.json,
which tests/test_examples.py checks.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from builders import RunWriter, new_writer  # noqa: E402
from lines import edit_line, split  # noqa: E402

from tiny_agent.journal.transcript import Usage  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "sessions" / "examples"

OPENROUTER_TOOL_CALL = json.dumps(
    {
        "id": "gen-1761000000-AbCdEf",
        "provider": "Example",
        "model": "test/model",
        "object": "chat.completion",
        "created": 1761000000,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "native_finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "reasoning": "The user wants to know what the README says; read it first.",
                    "tool_calls": [
                        {"index": 0, "id": "call_readme", "type": "function",
                         "function": {"name": "read", "arguments": "{\"path\":\"README.md\"}"}}
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
                  "prompt_tokens_details": {"cached_tokens": 800, "cache_write_tokens": 300}, "cost": 0.00042},
    },
    separators=(",", ":"),
)
OPENROUTER_ANSWER = json.dumps(
    {
        "id": "gen-1761000001-GhIjKl",
        "model": "test/model",
        "object": "chat.completion",
        "created": 1761000001,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "The README explains how to install and run tiny-agent.",
                                 "refusal": None, "annotations": []}}],
        "usage": {"prompt_tokens": 1300, "completion_tokens": 14, "prompt_tokens_details": {"cached_tokens": 1100}},
    },
    separators=(",", ":"),
)


def tool_run(path: Path, *, close: bool = True, finish_tool: bool = True) -> RunWriter:
    writer = new_writer(path)
    run = RunWriter(writer)
    run.start("What does the README say?")
    run.attempt()
    run.raw(OPENROUTER_TOOL_CALL)
    asked = run.call_tools([("read", '{"path":"README.md"}')], Usage(100, 40, 800, 300), ids=["call_readme"])
    run.run_tool(asked, 0, "# tiny-agent\n\nInstall with pip, then run `tiny-agent demo`.\n", finish=finish_tool)
    if finish_tool:
        run.attempt()
        run.raw(OPENROUTER_ANSWER)
        answer = run.answer("The README explains how to install and run tiny-agent.", Usage(200, 14, 1100, 0))
        run.finish(answer)
    if close:
        writer.close()
    else:
        writer.close(seal=False)
    return run


def main() -> None:
    if EXAMPLES.exists():
        for old in EXAMPLES.glob("*.jsonl"):
            old.unlink()
    EXAMPLES.mkdir(parents=True, exist_ok=True)
    tool_run(EXAMPLES / "tool-run.jsonl")
    tool_run(EXAMPLES / "crashed-mid-tool.jsonl", close=False, finish_tool=False)
    shutil.copy(EXAMPLES / "crashed-mid-tool.jsonl", EXAMPLES / "torn-tail.jsonl")
    with open(EXAMPLES / "torn-tail.jsonl", "ab") as file:
        file.write(b'[{"kind":"entry","seq":8,"id":"01a2')
    sealed = (EXAMPLES / "tool-run.jsonl").read_bytes()
    (EXAMPLES / "tampered.jsonl").write_bytes(sealed.replace(b"Install with pip", b"Install with npm", 1))

    def add_reasoning(facts: list) -> list:
        facts[0]["entry"]["message"]["reasoning"] = "provider-only text that must never enter a transcript"
        return facts

    lines = split(sealed)
    assistant_line = next(
        number for number, line in enumerate(lines, start=1) if b'"stopReason":"toolUse"' in line
    )
    (EXAMPLES / "polluted.jsonl").write_bytes(edit_line(sealed, assistant_line, add_reasoning))
    for lock in EXAMPLES.glob("*.lock"):
        lock.unlink()
    print("\n".join(sorted(path.name for path in EXAMPLES.glob("*.jsonl"))))


if __name__ == "__main__":
    main()
