"""Bounded output buffers: a ring for background logs, a head+tail capture for `exec`.

Offsets are absolute byte offsets into a stream (bytes written since it started), so a reader's
cursor stays meaningful after old bytes have been dropped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from toolroute.textsafety import cut_notice


def utf8_end(data: bytes | bytearray, end: int) -> int:
    """`end`, moved back so that data[:end] does not stop inside a UTF-8 sequence."""
    i = end - 1
    while i >= 0 and end - i <= 3 and (data[i] & 0xC0) == 0x80:
        i -= 1
    if i < 0 or data[i] < 0x80 or (data[i] & 0xC0) == 0x80:
        return end  # ASCII, or not valid UTF-8 anyway: nothing to protect
    lead = data[i]
    width = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4
    return i if end - i < width else end


def utf8_start(data: bytes | bytearray, start: int) -> int:
    """`start`, moved forward past continuation bytes (at most 3) so data[start:] starts a character."""
    i = start
    while i < len(data) and i - start < 3 and (data[i] & 0xC0) == 0x80:
        i += 1
    return i


class RingBuffer:
    """The last `capacity` bytes of a stream. Thread-safe: one writer, any number of readers.

    Storage grows up to `capacity` and then wraps, so a quiet process costs little and a chatty
    one never holds more than `capacity` bytes.
    """

    __slots__ = ("_buf", "_capacity", "_floor", "_lock", "_total")

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self._capacity = capacity
        self._buf = bytearray()
        self._total = 0
        self._floor = 0  # offsets below this were released (`release`)
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Bytes of storage this buffer holds now."""
        return len(self._buf)

    def release(self) -> int:
        """Let go of everything held (a stream that has ended, whose output nobody may read any
        more: over a memory budget); reads then find nothing before the current end. Returns
        the bytes freed."""
        with self._lock:
            freed = len(self._buf)
            self._buf = bytearray()
            self._floor = self._total
            return freed

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def total(self) -> int:
        """Bytes written so far (the offset one past the newest byte)."""
        return self._total

    @property
    def start(self) -> int:
        """Offset of the oldest byte still held."""
        return max(0, self._total - self._capacity, self._floor)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        size = len(view)
        if size == 0:
            return
        with self._lock:
            buf, cap = self._buf, self._capacity
            if size >= cap:  # only the last `cap` bytes survive; place them where offsets expect
                if len(buf) < cap:
                    buf.extend(bytes(cap - len(buf)))
                self._total += size
                pos = self._total % cap
                tail = view[size - cap :]
                buf[pos:cap] = tail[: cap - pos]
                buf[:pos] = tail[cap - pos :]
                return
            room = cap - len(buf)
            if room > 0:  # still growing: plain append
                take = min(room, size)
                buf += view[:take]
                self._total += take
                view, size = view[take:], size - take
                if size == 0:
                    return
            pos = self._total % cap
            first = min(size, cap - pos)
            buf[pos : pos + first] = view[:first]
            if first < size:
                buf[: size - first] = view[first:]
            self._total += size

    def read(self, offset: int, limit: int) -> tuple[int, bytes]:
        """Up to `limit` bytes from `offset` (clamped to what is held): (actual offset, bytes)."""
        with self._lock:
            cap = self._capacity
            lo = min(max(offset, self._total - cap, self._floor, 0), self._total)
            hi = min(self._total, lo + max(limit, 0))
            size = hi - lo
            if size <= 0:
                return lo, b""
            pos = lo % cap
            if pos + size <= cap:
                return lo, bytes(self._buf[pos : pos + size])
            return lo, bytes(self._buf[pos:]) + bytes(self._buf[: size - (cap - pos)])

    def tail(self, limit: int) -> tuple[int, bytes]:
        """The newest `limit` bytes: (their offset, bytes)."""
        return self.read(self._total - limit, limit)


@dataclass(frozen=True)
class Chunk:
    """A slice of a stream decoded for the model, with the cursor to continue from."""

    offset: int  # where this chunk starts
    next_offset: int  # pass this back as `offset` to continue
    dropped: int  # bytes lost between the requested offset and `offset` (the ring overflowed)
    more: bool  # bytes after `next_offset` are already buffered
    text: str


def read_chunk(ring: RingBuffer, offset: int | None, limit: int, *, final: bool) -> Chunk:
    """Read from `offset` (None: the tail), never splitting a UTF-8 character.

    `final` says the stream has ended, so a trailing incomplete character is shown (replaced)
    rather than held back for the next read.
    """
    if offset is None:
        start, data = ring.tail(limit)
        cut = utf8_start(data, 0)
        start, data = start + cut, data[cut:]
        requested = start
    else:
        requested = offset
        start, data = ring.read(offset, limit)
        if start > offset:  # the ring dropped the requested bytes: realign on a character
            cut = utf8_start(data, 0)
            start, data = start + cut, data[cut:]
    end = start + len(data)
    if not (final and end == ring.total):
        keep = utf8_end(data, len(data))
        if keep > 0:  # never stall on a lone partial character
            data = data[:keep]
    next_offset = start + len(data)
    return Chunk(
        offset=start,
        next_offset=next_offset,
        dropped=max(0, start - requested),
        more=next_offset < ring.total,
        text=data.decode("utf-8", "replace"),
    )


class HeadTail:
    """What `exec` keeps of a stream: the first and the last `limit` bytes, and the total size."""

    __slots__ = ("_head", "_limit", "_tail")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._head = bytearray()
        self._tail = RingBuffer(limit)

    @property
    def total(self) -> int:
        return self._tail.total

    def write(self, data: bytes) -> None:
        room = self._limit - len(self._head)
        if room > 0:
            self._head += data[:room]
        self._tail.write(data)

    def render(self, budget: int) -> tuple[str, int]:
        """The stream as text of at most `budget` bytes plus a marker: (text, bytes omitted)."""
        total = self.total
        if total <= budget:  # budget <= limit, so the head holds it all
            return bytes(self._head[:total]).decode("utf-8", "replace"), 0
        head = bytes(self._head[: budget // 2])
        head = head[: utf8_end(head, len(head))]
        _, tail = self._tail.tail(budget - budget // 2)
        tail = tail[utf8_start(tail, 0) :]
        omitted = total - len(head) - len(tail)
        marker = f"\n{cut_notice(omitted, total, 'bytes', 'only the head and tail are shown')}\n"
        return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace"), omitted


def share_budget(sizes: tuple[int, int], budget: int) -> tuple[int, int]:
    """Split one output budget between two streams; what one does not need goes to the other."""
    a, b = sizes
    if a + b <= budget:
        return a, b
    half = budget // 2
    if a <= half:
        return a, budget - a
    if b <= budget - half:
        return budget - b, b
    return half, budget - half
