"""acagent's HTTP/1.1 client for plain-http endpoints (``acagent/providers/_h1.py``).

A real TCP server on a thread answers each request with scripted raw bytes (each piece written
and flushed on its own, so framing boundaries fall where the test puts them); it records the
requests and how many connections it accepted.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from acagent.providers._h1 import Client, WireError, usable_for
from acagent.providers._h1_response import _parse_head

pytestmark = pytest.mark.anyio


@dataclass
class RawServer:
    """Answers the n-th request (over all connections) with ``answers[n]``: a list of byte
    pieces; ``None`` as a piece closes the connection there."""

    answers: list[list[bytes | None]]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _handle(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                head, _, data = data.partition(b"\r\n\r\n")
                length = int(
                    next(
                        line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
                    ).split(b":")[1]
                )
                while len(data) < length:
                    data += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + data[:length])
                data = data[length:]
                answer = self.answers[len(self.requests) - 1]
                for piece in answer:
                    if piece is None:
                        return
                    conn.sendall(piece)
                    time.sleep(0.01)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[list[RawServer]]:
    made: list[RawServer] = []
    yield made
    for s in made:
        s.close()


def _serve(made: list[RawServer], *answers: list[bytes | None]) -> RawServer:
    s = RawServer(list(answers))
    made.append(s)
    return s


async def _post(client: Client, url: str, body: bytes = b'{"a":1}') -> tuple[int, bytes]:
    response = await client.send(client.build_request("POST", url, content=body, headers={"x-k": "v"}))
    try:
        return response.status_code, await response.aread()
    finally:
        await response.aclose()


OK_LEN = [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\n", b"he", b"llo"]


async def test_content_length_bodies_reuse_one_connection(server: list[RawServer]) -> None:
    s = _serve(server, OK_LEN, OK_LEN, OK_LEN)
    client = Client({"User-Agent": "acagent"})
    for _ in range(3):
        assert await _post(client, s.url) == (200, b"hello")
    await client.aclose()
    assert s.connections == 1
    first = s.requests[0]
    assert first.startswith(b"POST /v1/chat HTTP/1.1\r\nhost: 127.0.0.1:")
    assert b"\r\nuser-agent: acagent\r\n" in first and b"\r\nx-k: v\r\n" in first
    assert first.endswith(b'content-length: 7\r\n\r\n{"a":1}')


async def test_a_chunked_body_split_anywhere_streams_its_data(server: list[RawServer]) -> None:
    wire = b"4;ext=1\r\ndata\r\n6\r\n: one\n\r\n0\r\nx-trailer: t\r\n\r\n"
    pieces: list[bytes | None] = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"]
    pieces += [wire[i : i + 3] for i in range(0, len(wire), 3)]
    s = _serve(server, pieces, OK_LEN)
    client = Client({})
    response = await client.send(client.build_request("POST", s.url, content=b"{}", headers={}))
    got = [piece async for piece in response.aiter_bytes()]
    assert b"".join(got) == b"data: one\n" and len(got) > 2  # delivered as it came
    assert await _post(client, s.url) == (200, b"hello")  # the connection was kept
    await client.aclose()
    assert s.connections == 1


async def test_a_body_until_close_and_http_1_0_are_not_reused(server: list[RawServer]) -> None:
    s = _serve(
        server,
        [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"all ", b"of it", None],
        [b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"],
        OK_LEN,
    )
    client = Client({})
    assert await _post(client, s.url) == (200, b"all of it")
    assert await _post(client, s.url) == (200, b"ok")
    assert await _post(client, s.url) == (200, b"hello")
    await client.aclose()
    assert s.connections == 3


async def test_a_connection_the_server_closed_while_idle_is_not_reused(server: list[RawServer]) -> None:
    s = _serve(server, [*OK_LEN, None], OK_LEN)
    client = Client({})
    assert await _post(client, s.url) == (200, b"hello")
    time.sleep(0.1)  # the server's close has arrived
    assert await _post(client, s.url) == (200, b"hello")
    await client.aclose()
    assert s.connections == 2


async def test_interim_responses_are_skipped(server: list[RawServer]) -> None:
    s = _serve(server, [b"HTTP/1.1 100 Continue\r\n\r\n", *OK_LEN])
    client = Client({})
    assert await _post(client, s.url) == (200, b"hello")
    await client.aclose()


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", None], "9 bytes before|4 bytes before"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"], "malformed chunk size"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n"], "longer than its size"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", None], "inside a chunked body"),
        (
            [b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx"],
            "unsupported content-encoding",
        ),
        ([b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nbad"], "does not decode"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx"], "malformed content-length"),
        ([b"HTTP/1.1 2x0 OK\r\n\r\n"], "malformed status line"),
        ([b"SPDY/3 200 OK\r\n\r\n"], "malformed status line"),
        ([b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"], "malformed header line"),
        ([b"HTTP/1.1 200 OK\r\n", None], "without sending a response"),
        ([None], "without sending a response"),
    ],
)
async def test_a_broken_answer_is_a_wire_error(
    server: list[RawServer], answer: list[bytes | None], match: str
) -> None:
    s = _serve(server, answer)
    client = Client({})
    with pytest.raises(WireError, match=match):
        await _post(client, s.url)
    await client.aclose()


async def test_compressed_bodies_are_decoded(server: list[RawServer]) -> None:
    zipped = gzip.compress(b"zipped text")
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw_deflate = raw.compress(b"raw deflate") + raw.flush()
    wrapped = zlib.compress(b"zlib deflate")
    s = _serve(
        server,
        [
            f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(zipped)}\r\n\r\n".encode(),
            zipped[:7],
            zipped[7:],
        ],
        [
            f"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: {len(raw_deflate)}\r\n\r\n".encode(),
            raw_deflate,
        ],
        [
            f"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Length: {len(wrapped)}\r\n\r\n".encode(),
            wrapped,
        ],
    )
    client = Client({})
    assert await _post(client, s.url) == (200, b"zipped text")
    assert await _post(client, s.url) == (200, b"raw deflate")
    assert await _post(client, s.url) == (200, b"zlib deflate")
    await client.aclose()


async def test_a_body_left_unread_closes_its_connection(server: list[RawServer]) -> None:
    s = _serve(server, [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", b"12345"], OK_LEN)
    client = Client({})
    response = await client.send(client.build_request("POST", s.url, content=b"{}", headers={}))
    async for _piece in response.aiter_bytes():
        break
    await response.aclose()
    assert await _post(client, s.url) == (200, b"hello")
    await client.aclose()
    assert s.connections == 2


async def test_a_body_in_parts_is_sent_with_its_length(server: list[RawServer]) -> None:
    class Parts:
        parts: ClassVar[list[bytes]] = [b'{"a":', b"[1,2]", b"}"]

    s = _serve(server, OK_LEN)
    client = Client({})
    response = await client.send(client.build_request("POST", s.url, content=Parts(), headers={}))
    assert await response.aread() == b"hello"
    await client.aclose()
    assert s.requests[0].endswith(b'content-length: 11\r\n\r\n{"a":[1,2]}')


async def test_a_refused_connection_is_a_wire_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    client = Client({})
    with pytest.raises(WireError, match="cannot connect"):
        await client.send(client.build_request("POST", f"http://127.0.0.1:{port}/", content=b"", headers={}))
    with pytest.raises(WireError, match="not a plain-http URL"):
        client.build_request("POST", "https://example.com/", content=b"", headers={})


def test_the_head_parser() -> None:
    version, status, headers = _parse_head(b"HTTP/1.1 429 Too Many\r\nRetry-After: 3\r\nX-A: 1\r\nx-a: 2")
    assert (version, status) == ("HTTP/1.1", 429)
    assert headers.get("retry-after") == "3" and headers.get("X-A") == "1, 2" and headers.get("nope") is None
    assert headers.items() == [("Retry-After", "3"), ("X-A", "1"), ("x-a", "2")]
    assert _parse_head(b"HTTP/1.1 204\nA: b")[1] == 204  # no reason phrase, bare LF


def test_which_endpoints_it_serves() -> None:
    assert usable_for("http://localhost:11434/v1", {})
    assert not usable_for("https://api.openai.com/v1", {})
    assert not usable_for("http://localhost:11434/v1", {"ALL_PROXY": "http://p:1"})


async def test_user_information_in_the_url_is_sent_as_basic_credentials(server: list[RawServer]) -> None:
    # httpx sends it so (in place of the key's bearer header); _h1 dropped it (a gateway behind
    # basic auth at http://user:pw@host answered 401 once plain http went through _h1).
    s = _serve(server, OK_LEN)
    client = Client({"authorization": "Bearer k"})
    url = s.url.replace("http://", "http://us%65r:p%40ss@")
    assert await _post(client, url) == (200, b"hello")
    await client.aclose()
    head = s.requests[0].decode()
    assert "\r\nauthorization: Basic dXNlcjpwQHNz\r\n" in head and "Bearer" not in head  # user:p@ss
    assert f"\r\nhost: 127.0.0.1:{s.port}\r\n" in head


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        # str.isdigit() and int() take these; HTTP does not (a ValueError escaped as a bug, F126).
        ([b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\nxx"], "malformed content-length"),
        ([b"HTTP/1.1 2\xb20 OK\r\nContent-Length: 0\r\n\r\n"], "malformed status line"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nxx"], "malformed content-length"),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx"], "malformed content-length"),
    ],
)
async def test_a_framing_error_is_the_heads(
    server: list[RawServer], answer: list[bytes | None], match: str
) -> None:
    s = _serve(server, answer)
    client = Client({})
    with pytest.raises(WireError, match=match):
        await client.send(client.build_request("POST", s.url, content=b"{}", headers={}))
    await client.aclose()


@pytest.mark.parametrize("size", [b"0x5", b"+5", b"5_0", b"\xb2"])
async def test_a_chunk_size_is_hex_digits_only(server: list[RawServer], size: bytes) -> None:
    s = _serve(
        server, [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\nhello\r\n0\r\n\r\n"]
    )
    client = Client({})
    with pytest.raises(WireError, match="malformed chunk size"):
        await _post(client, s.url)
    await client.aclose()


async def test_folded_headers_and_identity_in_a_coding_list_are_read_as_httpx_reads_them(
    server: list[RawServer],
) -> None:
    zipped = gzip.compress(b"zipped")
    s = _serve(
        server,
        [b"HTTP/1.1 200 OK\r\nX-A: a\r\n  b\r\nContent-Length: 2\r\n\r\nok"],
        [
            f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip, identity\r\nContent-Length: {len(zipped)}\r\n\r\n".encode(),
            zipped,
        ],
    )
    client = Client({})
    response = await client.send(client.build_request("POST", s.url, content=b"{}", headers={}))
    assert response.headers.get("x-a") == "a b" and await response.aread() == b"ok"
    assert await _post(client, s.url) == (200, b"zipped")
    await client.aclose()


@pytest.mark.parametrize("own_client", [True, False], ids=["h1", "httpx"])
async def test_a_body_that_does_not_decode_is_a_truncated_stream_on_both_paths(
    server: list[RawServer], monkeypatch: pytest.MonkeyPatch, own_client: bool
) -> None:
    from acagent.errors import StreamTruncated
    from acagent.providers import _h1
    from acagent.providers._openai import OpenAIProvider
    from tests.providers.helpers import collect, make_request

    if not own_client:
        monkeypatch.setattr(_h1, "usable_for", lambda *_a, **_k: False)
    s = _serve(server, [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 7\r\n\r\ndata: x"])
    provider = OpenAIProvider("m", base_url=s.url, api_key="k")
    # httpx's DecodingError is no TransportError: it escaped the adapter as a bug, not a retry.
    with pytest.raises(StreamTruncated, match=r"does not decode|decompress"):
        await collect(provider, make_request())
    await provider.aclose()


def _chunked_stream(body: bytes) -> list[bytes | None]:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    return [head, b"%x\r\n%s\r\n" % (len(body), body), b"0\r\n\r\n"]


@pytest.mark.parametrize("own_client", [True, False], ids=["h1", "httpx"])
async def test_a_finished_stream_leaves_its_connection_for_the_next_call(
    server: list[RawServer], monkeypatch: pytest.MonkeyPatch, own_client: bool
) -> None:
    """Before: the response was closed at ``[DONE]``, before the body's last chunk was read, so
    the connection was dropped and every call paid a new connect (over https a TLS handshake)."""
    from acagent.providers import _h1
    from acagent.providers._openai import OpenAIProvider
    from tests.mockprovider import openai_text
    from tests.providers.helpers import collect, make_request

    if not own_client:
        monkeypatch.setattr(_h1, "usable_for", lambda *_a, **_k: False)
    body = openai_text("hello", usage=(3, 1))
    s = _serve(server, _chunked_stream(body), _chunked_stream(body), _chunked_stream(body))
    provider = OpenAIProvider("m", base_url=s.url, api_key="k")
    try:
        for _ in range(3):
            _, response = await collect(provider, make_request())
            assert "".join(p.text for p in response.parts if hasattr(p, "text")) == "hello"
    finally:
        await provider.aclose()
    assert len(s.requests) == 3 and s.connections == 1
