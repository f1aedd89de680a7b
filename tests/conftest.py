"""Shared test plumbing: where the read-only conformance data lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """``../shared`` beside the project root, unless TINY_AGENT_SHARED points elsewhere."""
    override = os.environ.get("TINY_AGENT_SHARED")
    return Path(override) if override else PROJECT_ROOT.parent / "shared"


def conformance_dir() -> Path:
    return shared_dir() / "conformance" / "tiny-agent-session-v2"


@pytest.fixture(scope="session")
def conformance() -> Path:
    path = conformance_dir()
    if not path.is_dir():
        pytest.fail(f"conformance fixtures not found at {path} (set TINY_AGENT_SHARED)")
    return path
