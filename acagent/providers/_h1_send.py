"""Writing a request on a plain-http connection without copying its unchanged large parts again.

Figure 8 (CPU per model call vs history) profiled with ``perf``: after the body stopped being
encoded and joined again on every call (:mod:`acagent.providers._body`), what still grew with
the history was the kernel copying the ≈ 2 MB body of a 500-turn history from the process
into the socket on every call (``_copy_from_iter`` under ``send``: ≈ 0.5 ms of the loop
thread's ≈ 1.4 ms growth), plus an event-loop trip per part (anyio's ``send`` checkpoints).

So a large part that a request shares with the one before (the encoder's cached runs and
big messages are the same ``bytes`` objects from call to call) is kept in a memory file
(``memfd``, :class:`Spool`) and handed to the kernel with ``os.sendfile``: the socket then
references the file's pages instead of copying the bytes (the copy into the file is made
once, the second time the part is sent, so a part sent only once is never copied twice).
The client's parts share one memory file (one descriptor per client, not per part). The cost
is memory: each spooled part is held twice (its ``bytes`` and its file pages) while requests
keep sending it; a part the latest request did not send is forgotten, and the file is written
anew once less than half of it is still sent (at most twice the kept bytes).

The bytes sent are exactly the parts' bytes, in order. They are written straight to the
socket while the kernel takes them all; from the first write the kernel takes only partly, the
rest goes through the connection's stream as before (which waits for the socket). Nothing of
an earlier request can be waiting in the stream's own buffer then: anyio sets the asyncio
transport's write limits to 0, so a ``send`` returns only once the kernel has all its bytes,
and a request whose send did not finish (cancelled, failed) closes its connection. Without ``os.memfd_create``
and ``os.sendfile`` (not Linux), or with a stream that has no real socket, parts are
written as before.
"""

from __future__ import annotations

import os
import socket
import weakref
from collections.abc import Sequence

import anyio
import anyio.abc

__all__ = ["SPOOL_MIN", "Spool", "write_request"]

SPOOL_MIN = 65_536
"""Bytes from which a part is worth a memory file (the encoder's separate parts start here)."""

_USABLE = hasattr(os, "memfd_create") and hasattr(os, "sendfile")


_NEW = -1
"""Offset of a part to be written into the file (seen before, not there yet)."""


def _close(fd: list[int]) -> None:
    if fd:
        os.close(fd.pop())


class Spool:
    """The large parts the latest request sent; those seen in two requests are kept in one memory
    file (one descriptor per client, however many parts: a daemon serves many sessions).

    A part is appended to the file the second time it is sent; the parts a request no longer
    sends are forgotten, and once the forgotten bytes outweigh the kept ones the kept parts are
    written into a new file (each byte is copied O(1) times on average). ``spooled`` counts the
    bytes copied into memory files so far and ``sent_from_files`` the bytes the kernel sent from
    them (the flatness tests read both).
    """

    def __init__(self) -> None:
        self._parts: dict[int, tuple[bytes, int | None]] = {}
        """``id(part) -> (part, its offset in the file, or None: seen once)``; the part is held,
        so its id is not reused while the entry lives."""
        self._fd: list[int] = []
        """The memory file's descriptor, when there is one."""
        self._size = 0
        """Bytes in the file (kept and forgotten parts)."""
        self.spooled = 0
        self.sent_from_files = 0
        self._finalizer = weakref.finalize(self, _close, self._fd)

    @property
    def usable(self) -> bool:
        """Whether this platform has memory files and ``sendfile``."""
        return _USABLE

    @property
    def fd(self) -> int | None:
        """The memory file's descriptor (None until a part is kept)."""
        return self._fd[0] if self._fd else None

    def plan(self, parts: Sequence[bytes]) -> list[bytes | tuple[bytes, int]]:
        """``parts``, each large part the previous request sent too as ``(part, offset)`` in the
        file :attr:`fd`. Parts of the previous request that ``parts`` does not have are forgotten.
        """
        if not _USABLE:
            return list(parts)
        old: dict[int, tuple[bytes, int | None]] = self._parts
        new: dict[int, tuple[bytes, int | None]] = {}
        for part in parts:
            if len(part) >= SPOOL_MIN:
                hit = new.get(id(part)) or old.get(id(part))  # held: its id is its own
                new[id(part)] = (part, None) if hit is None else (part, _NEW if hit[1] is None else hit[1])
        self._parts = new
        self._place()
        out: list[bytes | tuple[bytes, int]] = []
        for part in parts:
            offset = new[id(part)][1] if len(part) >= SPOOL_MIN else None
            out.append(part if offset is None else (part, offset))
        return out

    def _place(self) -> None:
        """Write the parts marked :data:`_NEW` into the file (into a new file, with the kept
        parts, when those are less than half of it)."""
        parts = self._parts
        kept = sum(len(p) for p, offset in parts.values() if offset is not None and offset != _NEW)
        if self._size > 2 * kept:
            _close(self._fd)
            self._size = 0
            for key, (part, offset) in parts.items():
                if offset is not None:
                    parts[key] = (part, _NEW)
        for key, (part, offset) in parts.items():
            if offset == _NEW:
                parts[key] = (part, self._append(part))

    def _append(self, part: bytes) -> int:
        if not self._fd:
            self._fd.append(os.memfd_create("acagent-body", os.MFD_CLOEXEC))
        offset, view, done = self._size, memoryview(part), 0
        while done < len(part):
            done += os.pwrite(self._fd[0], view[done:], offset + done)
        self._size += len(part)
        self.spooled += len(part)
        return offset

    def close(self) -> None:
        """Close the memory file (the parts are forgotten)."""
        self._parts = {}
        self._size = 0
        self._finalizer()


def _write_now(fd: int, item: bytes | tuple[bytes, int], spool: Spool) -> int:
    """Write ``item`` to the non-blocking socket ``fd`` as far as the kernel takes it at once;
    returns the bytes written (``len`` of the part: all of it)."""
    if isinstance(item, tuple):
        part, offset = item
        file, done = spool.fd, 0
        assert file is not None
        try:
            while done < len(part):
                n = os.sendfile(fd, file, offset + done, len(part) - done)
                if n == 0:
                    break
                done += n
        except BlockingIOError:
            pass
        spool.sent_from_files += done
        return done
    view, done = memoryview(item), 0
    try:
        while done < len(item):
            done += os.write(fd, view[done:])
    except BlockingIOError:
        pass
    return done


def _socket_fd(stream: anyio.abc.SocketStream) -> int | None:
    """The descriptor of ``stream``'s TCP socket (asyncio gives a ``TransportSocket``, which
    has no ``send``), or None."""
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    if sock is None or getattr(sock, "type", None) != socket.SOCK_STREAM:
        return None
    fd = sock.fileno()
    return fd if fd >= 0 else None


async def write_request(
    stream: anyio.abc.SocketStream, head: bytes, parts: Sequence[bytes], spool: Spool
) -> None:
    """Write ``head`` and ``parts`` to ``stream``, in order (see the module docstring).

    Raises:
        OSError: from the socket; anyio's ``BrokenResourceError``/``ClosedResourceError``
            from the stream (the caller maps both to a wire error).
    """
    fd = _socket_fd(stream)
    items: list[bytes | tuple[bytes, int]] = [head, *spool.plan(parts)]
    for item in items:
        part = item[0] if isinstance(item, tuple) else item
        done = _write_now(fd, item, spool) if fd is not None else 0
        if done < len(part):
            fd = None  # the kernel is full: the stream writes the rest, in order
            await stream.send(memoryview(part)[done:] if done else part)  # type: ignore[arg-type]
