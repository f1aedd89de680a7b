"""tiny-agent: an event-sourced, append-only session journal for LLM agents."""

__version__ = "0.1.0"
