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
The cost is memory: each spooled part is held twice (its ``bytes`` and its file pages) while
requests keep sending it; a part the latest request did not send is dropped (its file closed).

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


def _close_all(files: dict[int, tuple[bytes, int | None]]) -> None:
    for _part, fd in files.values():
        if fd is not None:
            os.close(fd)
    files.clear()


class Spool:
    """The large parts the latest request sent, those seen twice each in a memory file.

    ``spooled`` counts the bytes copied into memory files so far and ``sent_from_files`` the
    bytes the kernel sent from them (the flatness tests read both).
    """

    def __init__(self) -> None:
        self._files: dict[int, tuple[bytes, int | None]] = {}
        """``id(part) -> (part, its memory file or None: seen once)``; the part is held, so
        its id is not reused while the entry lives."""
        self.spooled = 0
        self.sent_from_files = 0
        self._finalizer = weakref.finalize(self, _close_all, self._files)

    @property
    def usable(self) -> bool:
        """Whether this platform has memory files and ``sendfile``."""
        return _USABLE

    def plan(self, parts: Sequence[bytes]) -> list[bytes | tuple[bytes, int]]:
        """``parts`` with each large part seen in the previous request too as ``(part, fd)``.

        Parts of the previous request that ``parts`` does not have are forgotten.
        """
        if not _USABLE:
            return list(parts)
        old = self._files
        new: dict[int, tuple[bytes, int | None]] = {}
        out: list[bytes | tuple[bytes, int]] = []
        for part in parts:
            if len(part) < SPOOL_MIN:
                out.append(part)
                continue
            hit = new.get(id(part)) or old.pop(id(part), None)  # held: its id is its own
            if hit is None:
                new[id(part)] = (part, None)
                out.append(part)
                continue
            fd = hit[1] if hit[1] is not None else self._file(part)
            new[id(part)] = (part, fd)
            out.append((part, fd))
        _close_all(old)
        old.update(new)
        return out

    def _file(self, part: bytes) -> int:
        fd = os.memfd_create("acagent-body", os.MFD_CLOEXEC)
        try:
            view, done = memoryview(part), 0
            while done < len(part):
                done += os.write(fd, view[done:])
        except BaseException:
            os.close(fd)
            raise
        self.spooled += len(part)
        return fd

    def close(self) -> None:
        """Close every memory file (the parts are forgotten)."""
        self._finalizer()


def _write_now(fd: int, item: bytes | tuple[bytes, int], spool: Spool) -> int:
    """Write ``item`` to the non-blocking socket ``fd`` as far as the kernel takes it at once;
    returns the bytes written (``len`` of the part: all of it)."""
    if isinstance(item, tuple):
        part, file = item
        done = 0
        try:
            while done < len(part):
                n = os.sendfile(fd, file, done, len(part) - done)
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
