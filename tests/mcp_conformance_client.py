"""The client under test for the MCP conformance suite: ``python tests/mcp_conformance_client.py URL``.

The suite appends its server's URL as the last argument.  This connects as a run would (every
byte captured), lists the tools, calls each with arguments made from its schema, prints the
results and the captured messages, and exits 0, or 1 with one line on stderr.
"""

from __future__ import annotations

import sys
from typing import Any

from tiny_agent.agent.tools.mcp import servers_from_flags
from tiny_agent.agent.tools.mcp.hub import McpTools
from tiny_agent.errors import TinyAgentError
from tiny_agent.journal.facts import McpFact

SAMPLES = {"number": 5, "integer": 3, "boolean": True, "string": "x"}


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    return {name: SAMPLES.get(spec.get("type"), "x") for name, spec in properties.items() if "default" not in spec}


def main(argv: list[str]) -> int:
    facts: list[McpFact] = []
    try:
        servers = servers_from_flags([f"conformance={argv[-1]}"], {})
        tools = McpTools(servers, allow=["conformance"])
    except (TinyAgentError, IndexError) as error:
        print(f"conformance client: {error}", file=sys.stderr)
        return 1
    tools.commit = facts.extend
    failed = False
    try:
        for spec in tools.specs():
            outcome = tools.execute(spec.name, arguments_for(spec.parameters), None)
            failed = failed or not outcome.ok
            print(f"{spec.name}: {outcome.content}")
    finally:
        tools.close()
    for fact in facts:
        for message in fact.messages:
            print(message.direction, message.method or "", message.status or "", message.body or message.bodyBase64)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
