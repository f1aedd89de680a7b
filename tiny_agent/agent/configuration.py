"""What a model request depends on: the configuration, its snapshot (session-v2 §13.1) and digest.

The snapshot leaves out secrets, paths, clocks and replay declarations: the same settings digest the same anywhere.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET

from tiny_agent.journal.canonical import canonical_digest, sha256_digest
from tiny_agent.journal.state import ConfigurationSnapshot, GitState, InstructionDigest, SentOptions, ToolDigest
from tiny_agent.journal.tools import ToolDeclaration

ADAPTER_IDENTITY: Final = "chat-completions:v1"
"""Plain Chat Completions with no quirk adapters: what every journal held before profiles existed."""


class Configuration(msgspec.Struct, frozen=True):
    """Everything a model request depends on, minus secrets: the source of the snapshot and its digest
    (docs/agent.md, *Configuration snapshot and digest*, says what each member holds and what is not digested)."""

    model: str
    system_prompt: str
    tools: list[ToolDeclaration]
    routing_identity: str
    environment_identity: str
    adapter_identity: str = ADAPTER_IDENTITY
    output_options: dict[str, Any] = msgspec.field(default_factory=dict)
    instructions: list[InstructionDigest] = msgspec.field(default_factory=list)
    """The project instruction files offered (:mod:`tiny_agent.agent.instructions`), in order."""
    instructions_section: str = ""
    """Their marked section of the system prompt."""
    request_options: SentOptions | None = None
    git: GitState | None = None
    """The working directory's git commit, recorded but not digested (docs/journal.md)."""

    @property
    def prompt(self) -> str:
        """The system prompt sent: the user's, then the project instructions' marked section."""
        return "\n\n".join(part for part in (self.system_prompt, self.instructions_section) if part)

    def snapshot(self) -> ConfigurationSnapshot:
        return ConfigurationSnapshot(
            model=self.model,
            systemPromptDigest=sha256_digest(self.system_prompt.encode("utf-8")),
            tools=[ToolDigest(name=tool.name, definitionDigest=tool.definitionDigest) for tool in self.tools],
            adapterIdentity=self.adapter_identity,
            routingIdentity=self.routing_identity,
            outputOptionsDigest=canonical_digest(self.output_options),
            instructions=self.instructions or UNSET,
            requestOptions=self.request_options or UNSET,
            git=self.git or UNSET,
        )

    @property
    def digest(self) -> str:
        return canonical_digest(self.snapshot().digested())

    def declaration(self, name: str) -> ToolDeclaration | None:
        return next((tool for tool in self.tools if tool.name == name), None)
