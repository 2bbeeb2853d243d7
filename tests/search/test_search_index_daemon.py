"""The index daemon (issue 25, cold start): with `TOOLROUTE_SEARCH_INDEX_DAEMON=1`, a new process's
first query is answered by a long-lived daemon that holds the warm index, instead of a scan or a
restore. Every child here is a new process, as a CLI call or a restarted agent is; each compares
its answers with unindexed ones in the same process.

Attacked: changes made between processes, a daemon killed with SIGKILL, a socket that answers
garbage, oversized frames, extra descriptors or nothing at all, a socket of another user, and
(in Rust, `daemon/tests.rs`) a client passing one folder off as another's path. Workspaces and
cache folders live outside /tmp, as a deployment's do.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _index_daemon_helpers import index_daemon_processes, launched_daemons
from test_search_index import random_change, random_tree

from toolroute import _platform

pytestmark = pytest.mark.skipif(not _platform.LINUX_NATIVE, reason="the index daemon is Linux's (inotify, SCM_RIGHTS)")

CHILD = r"""
import json, sys
from pathlib import Path
from toolroute import _core
from toolroute.builtins.grep import GrepRequest
from toolroute.builtins.glob import GlobRequest
from toolroute.context import BuiltInToolContext

root, mode = Path(sys.argv[1]), sys.argv[2]  # query | warm
conf = BuiltInToolContext(root).confinement
QUERIES = [{"pattern": "needle"}, {"pattern": "needle", "output_mode": "count", "glob": ["*.py"]},
           {"pattern": "hay", "output_mode": "files_with_matches"}, {"pattern": "(?i)needle", "context": 1}]

def answer(request, index):
    r = _core.grep(conf, GrepRequest(**request), max_line_bytes=1000, index=index)
    return [r.files_matched, r.match_lines, [repr(x) for x in r.rows()], sorted(r.stats.items())]

def listing(index):
    r = _core.glob(conf, GlobRequest(pattern="**/*.py", sort="path"), index=index)
    return [r.paths(), sorted(r.stats.items())]

if mode == "warm":
    print(json.dumps({"ready": _core.search_index_warm(conf, timeout=60)}))
    sys.exit()
first = answer(QUERIES[0], True)
answered = _core.search_daemon_answered()
same = [first == answer(QUERIES[0], False)]
same += [answer(q, True) == answer(q, False) for q in QUERIES[1:]]
same.append(listing(True) == listing(False))
print(json.dumps({"answered_first": answered, "answered": _core.search_daemon_answered(), "same": same,
                  "stats": _core.search_index_stats(conf)}))
"""


@pytest.fixture
def place(deployed: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A cache folder outside /tmp and the environment of processes whose queries go to a daemon;
    whatever daemon the test started is stopped after it."""
    cache = deployed / "cache"
    env = {
        **os.environ,
        "TOOLROUTE_SEARCH_INDEX_CACHE": str(cache),
        "TOOLROUTE_SEARCH_INDEX_DAEMON": "1",
        "TOOLROUTE_SEARCH_INDEX_DAEMON_TTL": "120",
    }
    yield cache, env
    stop(env)
    for pid in daemons(cache):  # one that did not stop (a test's fake, or a hung one)
        os.kill(pid, signal.SIGKILL)


def stop(env: dict[str, str]) -> bool:
    """`toolroute index stop`, as a user would: exit 0 when a daemon answered, 3 when none did."""
    out = subprocess.run(
        [sys.executable, "-m", "toolroute", "index", "stop"], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode in (0, 3), out.stderr
    return out.returncode == 0


def daemons(cache: Path) -> list[int]:
    """Pids of the daemons listening in `cache` (by the socket names on their command lines)."""
    names = {p.name for p in cache.glob("daemon-*.sock")} | {p.name[:-5] + ".sock" for p in cache.glob("*.lock")}
    return [pid for pid, argv, _ in index_daemon_processes() if any(n.encode() in argv for n in names)]


def child(root: Path, env: dict[str, str], mode: str = "query") -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), mode], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(result.get("same", [True])), result  # whatever the daemon said, answers are the unindexed ones
    return result


def socket_of(cache: Path, timeout: float = 30) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(cache.glob("daemon-*.sock"))
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError("no daemon started")


def tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    for i in range(40):
        extra = "needle\n" if i % 7 == 0 else ""
        (root / "src" / f"m{i}.py").write_text(f"def f{i}():\n    return 'hay {i}'\n{extra}")
    (root / "notes.txt").write_text("needle in the notes\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "skip.log").write_text("needle ignored\n")
    return root


def warmed(root: Path, cache: Path, env: dict[str, str]) -> Path:
    """A daemon with a ready index of `root`: the first process starts the daemon (and scans)."""
    first = child(root, env)
    assert first["answered"] == 0  # no daemon yet: this one started it and scanned
    sock = socket_of(cache)
    deadline = time.monotonic() + 30
    while not child(root, env, "warm").get("ready"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return sock


def test_a_new_process_is_answered_by_the_daemon(deployed: Path, place: tuple[Path, dict[str, str]]) -> None:
    cache, env = place
    root = tree(deployed / "ws")
    sock = warmed(root, cache, env)
    assert (cache.stat().st_mode & 0o777) == 0o700 and sock.is_socket()
    got = child(root, env)
    assert got["answered_first"] == 1, got  # the very first query of the process
    assert got["answered"] == 5  # every query and the glob
    assert got["stats"]["state"] == "ready" and got["stats"]["served"] >= 5, got["stats"]
    assert len(daemons(cache)) == 1
    assert stop(env)
    assert not sock.exists()  # the stop waits until the socket is gone; the process ends next
    assert not stop(env)  # none answers any more
    deadline = time.monotonic() + 10
    while daemons(cache):
        assert time.monotonic() < deadline, "the daemon did not end when asked"
        time.sleep(0.02)


def test_by_default_a_slow_first_answer_starts_a_daemon_for_the_processes_after(
    deployed: Path, place: tuple[Path, dict[str, str]]
) -> None:
    """Unset (`auto`), a process asks a daemon only if one runs, and starts one only when its own
    first answer was slow (`_DAEMON_AFTER`): a large tree, whose next process is then warm."""
    cache, env = place
    root = tree(deployed / "ws")
    auto = {k: v for k, v in env.items() if k != "TOOLROUTE_SEARCH_INDEX_DAEMON"}
    quick = child(root, {**auto, "TOOLROUTE_SEARCH_INDEX_DAEMON_AFTER": "1000"})
    assert quick["answered"] == 0
    assert not launched_daemons(cache) and not list(cache.glob("daemon-*.sock"))  # the child has exited
    slow = {**auto, "TOOLROUTE_SEARCH_INDEX_DAEMON_AFTER": "0"}
    first = child(root, slow)
    assert first["answered"] == 0  # it scanned, then started one for the processes after it
    socket_of(cache)
    deadline = time.monotonic() + 30
    while not child(root, slow, "warm").get("ready"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    got = child(root, slow)
    assert got["answered_first"] == 1 and got["answered"] == 5, got
    assert len(daemons(cache)) == 1
    assert child(root, {**env, "TOOLROUTE_SEARCH_INDEX_DAEMON": "0"})["answered"] == 0  # off: never asked


LAUNCHES = r"""
import sys
from pathlib import Path
from toolroute import _core
from toolroute.builtins.grep import GrepRequest
from toolroute.context import BuiltInToolContext

root, mark = Path(sys.argv[1]), sys.argv[2]
# A stand-in daemon that only notes it was started (the real one would listen).
_core.search_daemon_command([sys.executable, "-c", f"open({mark!r}, 'a').write('started')"])
conf = BuiltInToolContext(root).confinement
_core.grep(conf, GrepRequest(pattern="needle"), max_line_bytes=1000, index=True)
"""


@pytest.mark.parametrize("cache", ["kept", "none"])
def test_a_daemon_is_started_only_where_it_could_listen(
    deployed: Path, place: tuple[Path, dict[str, str]], cache: str
) -> None:
    """Without a cache folder (`TOOLROUTE_SEARCH_INDEX_CACHE=0`) no daemon could make its socket:
    none is started, by default or with the setting on."""
    _, env = place
    root = tree(deployed / "ws")
    for setting in ("auto", "1"):
        mark = deployed / f"started-{setting}"
        run = {**env, "TOOLROUTE_SEARCH_INDEX_DAEMON": setting, "TOOLROUTE_SEARCH_INDEX_DAEMON_AFTER": "0"}
        if cache == "none":
            run["TOOLROUTE_SEARCH_INDEX_CACHE"] = "0"
        subprocess.run([sys.executable, "-c", LAUNCHES, str(root), str(mark)], env=run, check=True, timeout=60)
        deadline = time.monotonic() + (10 if cache == "kept" else 1)
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists() == (cache == "kept"), setting


def test_changes_made_between_processes_are_seen(deployed: Path, place: tuple[Path, dict[str, str]]) -> None:
    """Random changes (files, folders, renames, ignore rules) each made by another process, then a
    new process asks: its answers are always the unindexed ones."""
    cache, env = place
    rng = random.Random(25)
    root = deployed / "ws"
    random_tree(root, rng)
    warmed(root, cache, env)
    answered = 0
    for _ in range(12):
        subprocess.run([sys.executable, "-c", random_change(root, rng)], check=True, timeout=30)
        answered += child(root, env)["answered_first"]
    assert answered >= 6  # most first queries came from the daemon (a broken index scans until rebuilt)


def test_a_killed_daemon_is_replaced_and_queries_scan_meanwhile(
    deployed: Path, place: tuple[Path, dict[str, str]]
) -> None:
    cache, env = place
    root = tree(deployed / "ws")
    warmed(root, cache, env)
    (pid,) = daemons(cache)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid in daemons(cache):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    got = child(root, env)  # the socket is left, nobody listens: a scan, and a new daemon
    assert got["answered_first"] == 0
    deadline = time.monotonic() + 30
    while not [p for p in daemons(cache) if p != pid]:
        assert time.monotonic() < deadline, "no daemon replaced the killed one"
        time.sleep(0.05)
    while not child(root, env, "warm")["ready"]:
        assert time.monotonic() < deadline
    assert child(root, env)["answered_first"] == 1


def leave_key(sock: Path) -> None:
    """A key of our own beside `sock`, as a daemon leaves one."""
    fd = os.open(sock.with_suffix(".key"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, os.urandom(32))
    os.close(fd)


class Hostile:
    """A listener of our own user at the daemon's socket, answering each connection as `how` says;
    like a daemon, it leaves a key beside its socket for clients to show."""

    def __init__(self, path: Path, how: str, key: bool = True) -> None:
        self.how = how
        self.received = 0
        if key:
            leave_key(path)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        held = []
        while not self.done.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            held.append(conn)
            conn.settimeout(2)
            try:
                data = conn.recv(1 << 16)
            except OSError:
                continue
            self.received += len(data)
            try:
                self.answer(conn)
            except OSError:  # the client left first
                continue

    def answer(self, conn: socket.socket) -> None:
        if self.how == "garbage":
            conn.sendall(b"\x07\x00\x00\x00" + os.urandom(7))
        elif self.how == "huge":
            conn.sendall(b"\xff\xff\xff\xff" + b"\x01" * 64)
        elif self.how == "short":
            conn.sendall(b"\x40\x00\x00\x00\x01\x02")
            conn.close()
        elif self.how == "descriptors":
            r, w = os.pipe()
            socket.send_fds(conn, [b"\x01\x00\x00\x00\x03"], [r, w])
            os.close(r)
            os.close(w)
        elif self.how == "close":
            conn.close()
        # "silent": never answers

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=5)
        self.server.close()


@pytest.mark.parametrize("setting", ["1", "auto"])
@pytest.mark.parametrize("how", ["garbage", "huge", "short", "descriptors", "close", "silent"])
def test_a_hostile_socket_is_never_trusted(
    deployed: Path, place: tuple[Path, dict[str, str]], how: str, setting: str
) -> None:
    """What answers at the daemon's name is parsed with every length checked; whatever it says or
    does not say, the query scans and gives the unindexed answer, within the client's timeout
    (with the setting on, and by default, where a process asks whatever daemon listens)."""
    cache, env = place
    root = tree(deployed / "ws")
    sock = warmed(root, cache, env)
    assert stop(env)
    hostile = Hostile(sock, how)
    try:
        began = time.monotonic()
        asking = {**env, "TOOLROUTE_SEARCH_INDEX_DAEMON": setting}
        got = child(root, {**asking, "TOOLROUTE_SEARCH_INDEX_DAEMON_TIMEOUT": "0.5"})
        assert got["answered"] == 0, got
        assert time.monotonic() - began < 60
        assert hostile.received > 0  # it was asked, and not believed
    finally:
        hostile.close()


def test_a_socket_without_a_key_beside_it_is_never_spoken_to(
    deployed: Path, place: tuple[Path, dict[str, str]]
) -> None:
    """A listener of our own user that could not leave a key in the private folder (a confined
    command that reached the folder's socket name) is never sent a request."""
    cache, env = place
    root = tree(deployed / "ws")
    sock = warmed(root, cache, env)
    assert stop(env)
    assert not sock.with_suffix(".key").exists()  # the daemon took its key with it
    hostile = Hostile(sock, "garbage", key=False)
    try:
        assert child(root, env)["answered"] == 0
    finally:
        hostile.close()
    assert hostile.received == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to listen as another user")
def test_a_socket_of_another_user_is_never_spoken_to(deployed: Path, place: tuple[Path, dict[str, str]]) -> None:
    """A daemon socket bound by another user (moved into our private folder) is left before a byte
    is sent: the peer's uid is checked first."""
    cache, env = place
    root = tree(deployed / "ws")
    sock = warmed(root, cache, env)
    assert stop(env)
    theirs = deployed / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    listener = (
        "import os, socket, sys, time\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); print('up', flush=True)\n"
        "s.settimeout(20); got = 0\n"
        "try:\n"
        "    while True:\n"
        "        c, _ = s.accept(); c.settimeout(1)\n"
        "        try: got += len(c.recv(65536))\n"
        "        except OSError: pass\n"
        "        print('received', got, flush=True)\n"
        "except OSError: pass\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", listener, str(theirs / "s.sock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "up"
        os.rename(theirs / "s.sock", sock)
        leave_key(sock)  # only the peer's uid is left to give it away
        got = child(root, env)
        assert got["answered"] == 0
    finally:
        other.kill()
        out, _ = other.communicate(timeout=10)
    counts = [int(line.split()[1]) for line in out.splitlines() if line.startswith("received")]
    assert all(n == 0 for n in counts), out  # connected, perhaps, but never sent a byte


def test_processes_starting_at_once_leave_one_daemon(deployed: Path, place: tuple[Path, dict[str, str]]) -> None:
    """Four new processes find no daemon at the same moment and each starts one: one keeps the
    name (the lock), the others end at once."""
    cache, env = place
    root = tree(deployed / "ws")
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(root), "query"], env=env, stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    for c in children:
        assert c.wait(timeout=120) == 0
    socket_of(cache)
    deadline = time.monotonic() + 20
    while len(daemons(cache)) != 1:
        assert time.monotonic() < deadline, daemons(cache)
        time.sleep(0.05)
    # Every launcher has exited, so every loser was launched already: none is left starting.
    assert len(launched_daemons(cache)) == 1


@pytest.mark.parametrize("why", ["unused", "socket removed"])
def test_the_daemon_ends_by_itself(deployed: Path, place: tuple[Path, dict[str, str]], why: str) -> None:
    """Unused for its TTL, or once its socket is no longer its own, the daemon ends (and a removed
    socket is not put back)."""
    cache, env = place
    root = tree(deployed / "ws")
    ttl = "3" if why == "unused" else "120"
    env = {**env, "TOOLROUTE_SEARCH_INDEX_DAEMON_TTL": ttl}
    sock = warmed(root, cache, env)
    (pid,) = daemons(cache)
    if why == "socket removed":
        sock.unlink()
    deadline = time.monotonic() + 20
    while pid in daemons(cache) or _alive(pid):
        assert time.monotonic() < deadline, f"the daemon did not end ({why})"
        time.sleep(0.05)
    assert not sock.exists()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


WRITE_THEN_GREP = r"""
import json, sys
from pathlib import Path
from toolroute import BuiltInToolContext, ToolRouter, builtin_tool_context, _core

root = Path(sys.argv[1])
router = ToolRouter()
missed = []
with builtin_tool_context(BuiltInToolContext(root)):
    for i in range(30):
        token = f"tok{i}x{sys.argv[2]}"
        router.invoke("write_file", {"path": f"src/w{i % 3}.py", "content": f"x = '{token}'\n"})
        out = router.invoke("grep", {"pattern": token, "output_mode": "files_with_matches"})
        if f"src/w{i % 3}.py" not in out:
            missed.append((token, out))
print(json.dumps({"missed": missed, "answered": _core.search_daemon_answered()}))
"""


def test_a_write_is_seen_by_the_next_grep_through_the_daemon(
    deployed: Path, place: tuple[Path, dict[str, str]]
) -> None:
    """The tools as an agent calls them: write_file, then grep for what it wrote, 30 times in one
    process whose greps the daemon answers (its barrier sees the write before it answers)."""
    cache, env = place
    root = tree(deployed / "ws")
    warmed(root, cache, env)
    done = subprocess.run(
        [sys.executable, "-c", WRITE_THEN_GREP, str(root), "a"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["missed"] == []
    assert got["answered"] >= 25, got  # the daemon answered (a rebuild may scan a few)


def _read_frame(conn: socket.socket) -> tuple[bytes, list[int]]:
    """One frame (a little-endian u32 length, then the body) and the descriptors that came with it."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 4)
    if not data:
        raise ConnectionError("closed")
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "little"):
        more = conn.recv(1 << 16)
        if not more:
            raise ConnectionError("closed mid-frame")
        data += more
    return data, fds


class Recorder:
    """A relay at a daemon's socket name: records each request frame a client sends and passes it,
    with its descriptor, to the real daemon at `upstream` (or closes the connection, without)."""

    def __init__(self, path: Path, upstream: Path | None) -> None:
        self.upstream = upstream
        self.frames: list[bytes] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as up:
                conn.settimeout(5)
                up.settimeout(30)
                try:
                    if self.upstream is not None:
                        up.connect(str(self.upstream))
                    while True:
                        frame, fds = _read_frame(conn)
                        self.frames.append(frame)
                        if self.upstream is None:
                            break
                        socket.send_fds(up, [frame], fds)
                        for fd in fds:
                            os.close(fd)
                        conn.sendall(_read_frame(up)[0])
                except OSError:
                    continue

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        self.server.close()


def replay(sock: Path, frame: bytes, root_fd: int) -> bytes:
    """`frame` sent to the daemon at `sock` with `root_fd` as its root; the reply frame."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(sock))
        socket.send_fds(conn, [frame], [root_fd])
        return _read_frame(conn)[0]


def test_a_request_without_the_key_or_a_readable_root_is_refused(
    deployed: Path, place: tuple[Path, dict[str, str]]
) -> None:
    """The confused deputy the key and the readable root close. A command confined by Landlock
    under the server's own uid can reach the daemon's socket (Landlock does not govern connect),
    and can open another tenant's workspace for its path alone (O_PATH), though not read it. A
    genuine request recorded on its way to the daemon, replayed with the key changed or with such
    a descriptor, is refused; replayed as it was, with a readable root, it is answered (so the
    replay itself is sound)."""
    cache, env = place
    root = tree(deployed / "alice")
    sock = warmed(root, cache, env)
    key = sock.with_suffix(".key").read_bytes()
    # A second environment's daemon name, found by starting one and stopping it; a relay takes
    # its place, with the first daemon's key copied beside it.
    cache2 = deployed / "cache2"
    env2 = {**env, "TOOLROUTE_SEARCH_INDEX_CACHE": str(cache2)}
    child(root, env2)
    sock2 = socket_of(cache2)
    assert stop(env2)
    (cache2 / sock2.with_suffix(".key").name).write_bytes(key)
    os.chmod(sock2.with_suffix(".key"), 0o600)
    recorder = Recorder(sock2, sock)
    try:
        assert child(root, env2)["answered"] >= 1  # answered by the first daemon, through the relay
    finally:
        recorder.close()
    secret = b"needle in the notes"
    frame = next(f for f in recorder.frames if b"needle" in f and key in f)
    readable = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    path_only = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        assert secret in replay(sock, frame, readable)
        forged = frame.replace(key, bytes(32))
        refused = replay(sock, forged, readable)
        assert secret not in refused and b"key" in refused
        named = replay(sock, frame, path_only)
        assert secret not in named and b"reading" in named
    finally:
        os.close(readable)
        os.close(path_only)


def test_a_peer_that_says_nothing_or_is_refused_is_let_go(deployed: Path, place: tuple[Path, dict[str, str]]) -> None:
    """A peer that reaches the socket without the key (a confined command of the same user) can
    neither hold connections nor keep the daemon alive: silence is cut off after a few seconds, a
    refused request gets its refusal and then the end of the connection, and refusals do not count
    as use, so the daemon still ends after its TTL while one is refused every half second."""
    cache, env = place
    env = {**env, "TOOLROUTE_SEARCH_INDEX_DAEMON_TTL": "8"}
    root = tree(deployed / "ws")
    sock = warmed(root, cache, env)
    (pid,) = daemons(cache)
    assert child(root, env)["answered"] >= 1  # used just now: 8 s to live
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.settimeout(20)
    silent.connect(str(sock))
    began = time.monotonic()
    assert silent.recv(1) == b""  # closed by the daemon, not by our timeout
    assert time.monotonic() - began < 7.5 and _alive(pid)  # the silence was cut off, the daemon lives
    silent.close()
    assert child(root, env)["answered"] >= 1  # used again: refusals from now on must not extend it
    keyless = b"\x02\x00\x00\x00" + bytes(64)  # protocol 2, then nothing the daemon can read
    deadline = time.monotonic() + 30
    refusals = 0
    while _alive(pid):
        assert time.monotonic() < deadline, "refused peers kept the daemon alive"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
                peer.settimeout(10)
                peer.connect(str(sock))
                peer.sendall(len(keyless).to_bytes(4, "little") + keyless)
                reply, _ = _read_frame(peer)
                assert b"malformed" in reply
                assert peer.recv(1) == b""  # and let go
                refusals += 1
        except OSError:
            pass  # the daemon ended meanwhile
        time.sleep(0.5)
    assert refusals >= 8


def test_a_trickling_or_crowding_peer_is_bounded(deployed: Path, place: tuple[Path, dict[str, str]]) -> None:
    """The first request must come whole within a few seconds, however it trickles in (a read
    timeout alone restarted with every byte: one byte every 4 s held a connection for good), and
    at most 16 connections at a time may be waiting to show the key: a crowd of peers without it
    cannot take the daemon's connections (256), and a client with the key is answered after."""
    cache, env = place
    root = tree(deployed / "ws")
    sock = warmed(root, cache, env)
    trickle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    trickle.settimeout(2)
    trickle.connect(str(sock))
    sent = 0
    for _ in range(30):  # at most 30 s; the daemon cuts it off after about 5 bytes
        try:
            trickle.send(b"\x00")
            sent += 1
            if trickle.recv(1) == b"":
                break
        except TimeoutError:
            continue  # nothing to read yet: one more byte
        except OSError:
            break  # reset: cut off
    trickle.close()
    assert 1 <= sent < 10, sent
    crowd = []
    for _ in range(40):
        peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        peer.connect(str(sock))
        crowd.append(peer)
    # Beyond the 16 waiting ones, the daemon closes each at once: they read EOF right away.
    closed_at_once = 0
    for peer in crowd:
        peer.settimeout(0.5)
        with contextlib.suppress(TimeoutError, OSError):
            closed_at_once += peer.recv(1) == b""
    assert closed_at_once >= 40 - 16 - 4, closed_at_once  # (a few may be accepted as others end)
    for peer in crowd:
        peer.close()
    assert child(root, env)["answered"] >= 1
