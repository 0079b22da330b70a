"""An HTTP proxy in front of an S3 endpoint (moto) that injects the faults a real object store has.

Every request is forwarded on a connection of its own (``Connection: close``
both ways, so no client reuses a connection the proxy closed). A request is
faulted with probability ``rate`` until ``limit`` faults were injected; the
faults take turns:

- ``5xx``: ``503 SlowDown`` (or ``500 InternalError``) answered by the proxy,
  the request never reaching the store;
- ``reset``: the client's connection reset (RST) before forwarding, or
  *after* the store handled the request (the write happened, the answer is
  lost: the client must retry an operation that already took effect);
- ``slow``: the store's answer held back ``slow_seconds``.

``injected`` counts each kind. Runs on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections import Counter
from urllib.parse import urlparse

KINDS = ("5xx", "reset", "slow")
_ERRORS = (
    (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
)


class FaultingS3Proxy:
    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.05,
        limit: int = 1_000_000,
        slow_seconds: float = 2.0,
        seed: int | None = None,
    ) -> None:
        parsed = urlparse(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.rate, self.limit, self.slow_seconds = rate, limit, slow_seconds
        self.rng = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self._turn = 0
        self._server: asyncio.base_events.Server | None = None
        self.url = ""

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def total(self) -> int:
        return sum(self.injected.values())

    def _fault(self) -> str | None:
        if self.total >= self.limit or self.rng.random() >= self.rate:
            return None
        kind = KINDS[self._turn % len(KINDS)]
        self._turn += 1
        return kind

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head, body = await _read_request(reader, writer)
            if head is None:
                return
            self.requests += 1
            fault = self._fault()
            if fault == "5xx":
                self.injected["5xx"] += 1
                status, reason, code, message = _ERRORS[self.injected["5xx"] % 2]
                xml = (
                    f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                    f"<Message>{message}</Message></Error>"
                ).encode()
                if head.startswith(b"HEAD "):
                    xml = b""  # an answer to HEAD has no body, errors included
                writer.write(
                    f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n"
                    f"Content-Length: {len(xml)}\r\nConnection: close\r\n\r\n".encode()
                    + xml
                )
                await writer.drain()
                return
            after = self.rng.random() < 0.5
            if fault == "reset" and not after:
                self.injected["reset"] += 1
                _reset(writer)
                return
            answer = await self._forward(head, body)
            if fault == "reset":
                self.injected["reset"] += 1
                _reset(writer)
                return
            if fault == "slow":
                self.injected["slow"] += 1
                await asyncio.sleep(self.slow_seconds)
            writer.write(answer)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def _forward(self, head: bytes, body: bytes) -> bytes:
        lines = head.split(b"\r\n")
        kept = [lines[0]] + [h for h in lines[1:] if h and not h.lower().startswith((b"connection:", b"expect:"))]
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        try:
            up_writer.write(b"\r\n".join([*kept, b"Connection: close", b"", b""]) + body)
            await up_writer.drain()
            answer = await up_reader.read()
        finally:
            up_writer.close()
        status_and_headers, sep, rest = answer.partition(b"\r\n\r\n")
        headers = [h for h in status_and_headers.split(b"\r\n") if not h.lower().startswith(b"connection:")]
        return b"\r\n".join([*headers, b"Connection: close"]) + sep + rest


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[bytes | None, bytes]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None, b""
    head = head[:-4]
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if headers.get(b"expect", b"").lower() == b"100-continue":
        try:  # most clients send the body anyway; one that waits is told to go on
            await asyncio.wait_for(_first_byte(reader), timeout=0.5)
        except asyncio.TimeoutError:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        raw = b""  # forwarded as received: chunks, the last one, trailers, the empty line
        while True:
            size_line = await reader.readuntil(b"\r\n")
            raw += size_line
            if int(size_line.split(b";")[0].strip(), 16) == 0:
                while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                    raw += line
                return head, raw + b"\r\n"
            raw += await reader.readexactly(int(size_line.split(b";")[0].strip(), 16) + 2)
    length = int(headers.get(b"content-length", b"0") or 0)
    return head, (await reader.readexactly(length) if length else b"")


async def _first_byte(reader: asyncio.StreamReader) -> None:
    while not reader._buffer:  # noqa: SLF001 - waiting for the first body byte without consuming it
        if reader.at_eof():
            return
        await asyncio.sleep(0.02)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST, as a load balancer dropping the connection does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()
