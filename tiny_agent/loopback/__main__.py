"""``python -m tiny_agent.loopback --port 8765``: serve the demo script by hand."""

from __future__ import annotations

import argparse
import contextlib
import threading

from tiny_agent.loopback.demo import demo_script
from tiny_agent.loopback.server import LoopbackServer


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve the tiny-agent demo script on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with LoopbackServer(demo_script() * 50, port=args.port) as server:
        print(f"serving {server.base_url}/chat/completions (Ctrl-C to stop)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
