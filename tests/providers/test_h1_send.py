"""Large request parts sent again are sent from memory files (``acagent/providers/_h1_send.py``,
figure 8): the bytes on the wire stay exactly the parts, in order, also when the kernel takes
only part of a write and the connection's stream writes the rest."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import anyio
import pytest

from acagent.providers._h1 import Client
from acagent.providers._h1_send import SPOOL_MIN, Spool, write_request

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Spool().usable, reason="no memfd_create/sendfile on this platform"),
]


class Reader:
    """A TCP server reading each connection to its end once :attr:`go` is set."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.port = self.sock.getsockname()[1]
        self.go = threading.Event()
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        self.go.wait()
        data = bytearray()
        with conn:
            while more := conn.recv(1 << 20):
                data += more
        self.received.append(bytes(data))

    def close(self) -> bytes:
        self.go.set()
        self._thread.join()
        self.sock.close()
        return self.received[0]


@pytest.fixture
def reader() -> Iterator[Reader]:
    r = Reader()
    yield r
    r.go.set()
    r.sock.close()


def _parts(n: int) -> tuple[bytes, list[bytes]]:
    big = os.urandom(n)
    return big, [b'{"a":', big, b"}"]


async def test_a_part_sent_again_goes_from_a_memory_file_byte_for_byte(reader: Reader) -> None:
    """The second time the same large part is sent, the kernel sends it from a memory file;
    a part sent once, and the small ones, are never copied into one. Before, every part was
    copied into the socket on every request."""
    big, parts = _parts(3 * SPOOL_MIN)
    spool = Spool()
    reader.go.set()
    async with await anyio.connect_tcp("127.0.0.1", reader.port) as stream:
        await write_request(stream, b"HEAD1", parts, spool)
        assert (spool.spooled, spool.sent_from_files) == (0, 0)
        await write_request(stream, b"HEAD2", parts, spool)
        assert spool.spooled == len(big)
        await write_request(stream, b"HEAD3", [*parts, b"tail"], spool)
        assert spool.spooled == len(big)  # copied once
        assert spool.sent_from_files == 2 * len(big)
        await write_request(stream, b"HEAD4", [b"small"], spool)  # the large part is forgotten
        assert spool.fd is None  # and its file closed
    body = b"".join(parts)
    assert reader.close() == b"HEAD1" + body + b"HEAD2" + body + b"HEAD3" + body + b"tail" + b"HEAD4small"
    spool.close()


async def test_what_the_kernel_does_not_take_goes_through_the_stream_in_order(reader: Reader) -> None:
    """A peer that does not read yet: the first write the kernel takes only partly hands the rest
    of the request to the stream, which waits for the socket (the bytes arrive whole and in
    order, from a memory file or not)."""
    big, parts = _parts(4 << 20)
    spool = Spool()
    spool.plan(parts)  # seen once: this request sends it from its memory file
    async with await anyio.connect_tcp("127.0.0.1", reader.port) as stream:
        raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)

        async def release_once_blocked() -> None:
            while spool.sent_from_files == 0:  # set by the direct write, before the stream's
                await anyio.sleep(0)
            reader.go.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_once_blocked)
            await write_request(stream, b"HEAD", [*parts, b"end"], spool)
    assert 0 < spool.sent_from_files < len(big)
    assert reader.close() == b"HEAD" + b"".join(parts) + b"end"
    spool.close()


async def test_the_client_sends_recurring_parts_from_its_spool_and_closes_it() -> None:
    """Through :class:`Client`: a request repeated with the same large part posts the same bytes,
    the second time from the spool; ``aclose`` closes its memory files."""
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            with conn:
                data = bytearray()
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = bytes(data).partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                body = bytearray(rest)
                while len(body) < length:
                    body += conn.recv(1 << 20)
                received.append(bytes(body))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    class Parts:
        def __init__(self, parts: list[bytes]) -> None:
            self.parts = parts

    big, parts = _parts(2 * SPOOL_MIN)
    client = Client({})
    url = f"http://127.0.0.1:{server.getsockname()[1]}/v1/chat"
    for _ in range(2):
        response = await client.send(client.build_request("POST", url, content=Parts(parts), headers={}))
        assert await response.aread() == b"ok"
        await response.aclose()
    fd = client.spool.fd
    assert fd is not None
    assert client.spool.sent_from_files == len(big)
    await client.aclose()
    thread.join()
    server.close()
    assert received == [b"".join(parts)] * 2
    assert client.spool.fd is None
    with pytest.raises(OSError):
        os.fstat(fd)


def test_many_large_parts_share_one_file_and_forgotten_ones_are_dropped() -> None:
    """One descriptor per spool however many large parts a request has (a daemon serves many
    sessions; before, each part had a memory file of its own); when the parts still sent are
    less than half of the file, they are written into a new one."""
    parts = [os.urandom(SPOOL_MIN + i) for i in range(20)]
    spool = Spool()
    spool.plan(parts)
    planned = spool.plan(parts)
    fd = spool.fd
    assert fd is not None
    assert all(isinstance(item, tuple) for item in planned)
    for part, offset in planned:  # type: ignore[misc]
        assert os.pread(fd, len(part), offset) == part
    size = sum(map(len, parts))
    assert spool.spooled == size
    assert spool.plan(parts[:15]) == planned[:15]  # most of the file is still sent: kept as it is
    assert spool.spooled == size
    again = spool.plan([*parts[:5], b"small"])  # less than half of it now: a new file
    assert spool.spooled == size + sum(map(len, parts[:5]))
    assert again[-1] == b"small"
    for part, offset in again[:5]:  # type: ignore[misc]
        assert os.pread(spool.fd, len(part), offset) == part  # type: ignore[arg-type]
    spool.close()
    assert spool.fd is None
