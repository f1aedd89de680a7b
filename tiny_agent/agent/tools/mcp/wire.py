"""Every byte of an MCP session, captured below the SDK's parsing (docs/tools.md, "What is journaled").

stdio: :func:`stdio_transport` replaces the SDK's ``stdio_client``.  Streamable HTTP: :class:`RecordingTransport` tees
bodies asked for with ``Accept-Encoding: identity``, so the bytes are the JSON or the event stream itself.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import anyio
import httpx2
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

MAX_LINE: Final = 16 * 1024 * 1024
"""A stdio line longer than this ends the session instead of growing memory without bound."""
GRACE: Final = 2.0
"""Seconds a stdio server gets to exit after its stdin closes, and again after SIGTERM."""


@dataclass
class Captured:
    """One message as it crossed the wire: a stdio line (no LF) or an HTTP body."""

    direction: Literal["send", "recv"]
    data: bytes = b""
    method: str | None = None
    url: str | None = None
    status: int | None = None
    content_type: str | None = None
    incomplete: str | None = None
    done: bool = True
    """False while an HTTP response body is still arriving."""


@dataclass
class WireLog:
    """Captured messages in the order seen; appended in the event loop's thread, drained in the caller's."""

    records: list[Captured] = field(default_factory=list)
    stderr: deque[bytes] = field(default_factory=lambda: deque(maxlen=20))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, record: Captured) -> Captured:
        with self.lock:
            self.records.append(record)
        return record

    def drain(self, everything: bool = False) -> list[Captured]:
        """The finished records (all of them with ``everything``), removed from the log."""
        with self.lock:
            taken = [record for record in self.records if everything or record.done]
            self.records = [record for record in self.records if not (everything or record.done)]
        return taken

    def stderr_tail(self) -> str:
        return " | ".join(line.decode("utf-8", "replace").strip() for line in list(self.stderr)[-3:] if line.strip())


Streams = tuple[Any, Any]


@asynccontextmanager
async def stdio_transport(argv: list[str], env: dict[str, str], log: WireLog) -> AsyncGenerator[Streams, None]:
    """A stdio server's (read, write) streams of SessionMessage; OSError when it cannot be spawned."""
    process = await anyio.open_process(argv, env=get_default_environment() | env, start_new_session=True)
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdout is not None and process.stdin is not None and process.stderr is not None
    stdout, stdin, stderr = process.stdout, process.stdin, process.stderr

    async def read_stdout() -> None:
        buffer = bytearray()
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            async with read_in:
                async for chunk in stdout:
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        log.add(Captured("recv", line))
                        if line.strip():
                            try:
                                item: SessionMessage | Exception = SessionMessage(jsonrpc_message_adapter.validate_json(line))
                            except ValueError as error:  # pydantic's ValidationError is a ValueError
                                item = error
                            await read_in.send(item)
                    if len(buffer) > MAX_LINE:
                        log.add(Captured("recv", bytes(buffer), incomplete=f"line longer than {MAX_LINE} bytes"))
                        return
                if buffer:
                    log.add(Captured("recv", bytes(buffer), incomplete="no newline before the end of the output"))

    async def read_stderr() -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            async for chunk in stderr:
                log.stderr.extend(chunk.splitlines()[-20:])

    async def write_stdin() -> None:
        try:
            async with write_out:
                async for message in write_out:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
                    log.add(Captured("send", data))
                    await stdin.send(data + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_in.aclose()  # the session sees the connection end instead of waiting forever

    async def stop(graceful: bool) -> None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stdin.aclose()
        with anyio.move_on_after(GRACE if graceful else 0.0):
            await process.wait()
        if process.returncode is None:
            await terminate_posix_process_tree(process, GRACE)

    async with anyio.create_task_group() as group:
        for task in (read_stdout, read_stderr, write_stdin):
            group.start_soon(task)
        graceful = False
        try:
            yield read_out, write_in
            graceful = True
        finally:
            with anyio.CancelScope(shield=True):
                write_in.close()
                read_out.close()
                await stop(graceful)
            group.cancel_scope.cancel()


class _Tee(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, record: Captured) -> None:
        self._inner = inner
        self._record = record

    def _end(self, why: str | None) -> None:
        if not self._record.done:
            self._record.incomplete = why
            self._record.done = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._inner:
                self._record.data += part
                yield part
            self._end(None)
        except GeneratorExit:
            self._end("closed by the client")  # the SDK stops reading once its answer has arrived
            raise
        except BaseException as error:
            self._end(f"{type(error).__name__}: {error}".rstrip(": "))
            raise

    async def aclose(self) -> None:
        self._end("closed by the client")
        await self._inner.aclose()


class RecordingTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport, with every request body and response body recorded."""

    def __init__(self, log: WireLog) -> None:
        self._log = log
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._log.add(Captured("send", await request.aread(), method=request.method, url=str(request.url)))
        response = await self._inner.handle_async_request(request)
        record = self._log.add(
            Captured("recv", status=response.status_code, content_type=response.headers.get("content-type"), done=False)
        )
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, record),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def http_client(log: WireLog, headers: dict[str, str]) -> httpx2.AsyncClient:
    """The SDK's default client (30 s, 300 s reads), recording every body."""
    return httpx2.AsyncClient(
        transport=RecordingTransport(log),
        headers={"Accept-Encoding": "identity", **headers},
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
