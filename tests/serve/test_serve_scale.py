"""What a served user costs stays bounded: the per-user doors and workspace contexts are a cache
of the most recently used users (each context holds its workspace root open), and served mode
lifts the soft limit on open descriptors to the hard one, as a server with hundreds of users
needs (the usual soft limit of 1,024 is reached near 300 connected users)."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolroute import ToolRouter
from toolroute.errors import ToolError
from toolroute.serve import tenants
from toolroute.serve.tenants import Tenancy


def test_the_least_recently_used_users_are_dropped_from_the_cache(
    deployed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tenants, "MAX_CACHED_USERS", 2)
    router = ToolRouter()
    tenancy = Tenancy(router, ["read_file"], [], workspace_template=str(deployed / "ws" / "{user}"))
    first = tenancy.context("alice")
    tenancy.context("bob")
    assert tenancy.context("alice") is first  # used again: now the most recent
    tenancy.context("carol")  # bob, the least recent, goes
    assert set(tenancy._contexts) == {"alice", "carol"}
    doors = [tenancy.door(user) for user in ("alice", "bob", "carol")]
    assert len(tenancy._doors) == 2 and set(tenancy._doors) == {"bob", "carol"}
    again = tenancy.context("bob")  # made anew, on the same workspace
    assert again.workspace_root == deployed / "ws" / "bob" and again.user_id == "bob"
    assert doors[1] is tenancy.door("bob")
    router.close()


CHILD = """
import resource
import time
from toolroute.serve.served_mode import raise_descriptor_limit
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
assert soft == 256, soft
print(raise_descriptor_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)
"""


def test_served_mode_lifts_the_descriptor_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit here is too low to see a change")

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, preexec_fn=lower, timeout=60)
    assert child.returncode == 0, child.stderr[-2000:]
    returned, now, child_hard = (int(x) for x in child.stdout.split())
    assert returned == now > 256
    assert now == child_hard or child_hard == resource.RLIM_INFINITY


def test_idle_users_are_released_and_come_back_on_their_next_request(deployed: Path) -> None:
    """A user unseen for the idle timeout loses its cached door and workspace context, and its
    own upstream server process ends; its next request makes all of it again. A user seen
    meanwhile keeps everything."""
    from _mcp_helpers import tenant_stdio

    from toolroute.mcp.gateway import McpGateway
    from toolroute.naming import user_service_key
    from toolroute.serve.store import UserStore

    store = UserStore(f"sqlite:///{deployed / 'users.db'}")
    for user in ("alice", "bob"):
        store.add_user(user)
        store.add_server(user, "own", tenant_stdio(f"{user}-server"))
    router = ToolRouter(gateway=McpGateway())
    tenancy = Tenancy(router, ["read_file"], [], store=store, workspace_template=str(deployed / "ws" / "{user}"))
    try:
        for user in ("alice", "bob"):
            tenancy.door(user)
            tenancy.context(user)
            assert router.execute("echo", {"text": "hi"}, user_id=user).text == f"{user}-server:hi"
        gateway = router.gateway
        assert isinstance(gateway, McpGateway)

        def connected(user: str) -> bool:
            return gateway._services[user_service_key(user, "own")].connection.connected

        assert connected("alice") and connected("bob")
        time.sleep(0.3)
        tenancy.context("bob")  # bob is still here
        assert tenancy.release_idle(idle=0.25) == ["alice"]
        assert "alice" not in tenancy._doors and "alice" not in tenancy._contexts
        assert user_service_key("alice", "own") not in gateway._services and connected("bob")
        with pytest.raises(ToolError):
            router.execute("echo", {"text": "gone"}, user_id="alice")  # its tools left the table
        assert "bob" in tenancy._contexts
        # Back again: the door, the context and the server process are made anew.
        tenancy.door("alice")
        assert router.execute("echo", {"text": "again"}, user_id="alice").text == "alice-server:again"
        assert connected("alice") and tenancy.context("alice").user_id == "alice"
    finally:
        router.close()
        store.close()


def test_a_user_with_a_request_in_progress_is_never_released(deployed: Path) -> None:
    """A request that outlasts the idle timeout (a long call, or one queued behind a crowd's)
    keeps its user's door and own upstream server: releasing them under it made its next step
    fail with "no such MCP service" (seen under load). Idle time counts from the request's end."""
    from _mcp_helpers import tenant_stdio

    from toolroute.mcp.gateway import McpGateway
    from toolroute.serve.store import UserStore

    store = UserStore(f"sqlite:///{deployed / 'users.db'}")
    store.add_user("alice")
    store.add_server("alice", "own", tenant_stdio("alice-server"))
    router = ToolRouter(gateway=McpGateway())
    tenancy = Tenancy(router, ["read_file"], [], store=store, workspace_template=str(deployed / "ws" / "{user}"))
    releases: list[list[str]] = []
    try:
        with tenancy.serving("alice"), tenancy.serving("alice"):  # two requests, one user
            door = tenancy.door("alice")
            for _ in range(3):  # the release thread's rounds, each past the idle timeout
                time.sleep(0.3)
                releases.append(tenancy.release_idle(idle=0.25))
            # The door it took still reaches the user's own server, and its offer reads.
            assert door.execute("user_alice_tool_echo", {"text": "still"}).text == "alice-server:still"
            assert door.offer is not None
        assert releases == [[], [], []]
        assert tenancy.release_idle(idle=0.25) == []  # the request just ended: not idle yet
        time.sleep(0.3)
        assert tenancy.release_idle(idle=0.25) == ["alice"]
        # A request failing inside still ends its hold.
        with pytest.raises(RuntimeError), tenancy.serving("alice"):
            raise RuntimeError("the call failed")
        time.sleep(0.3)
        assert tenancy.release_idle(idle=0.25) == ["alice"] and not tenancy._busy
    finally:
        router.close()
        store.close()


def test_the_idle_release_thread_runs_on_its_own_and_stops() -> None:
    from toolroute.serve.idle import IdleRelease

    released: list[float] = []

    class Recording:
        def release_idle(self, idle: float) -> list[str]:
            released.append(idle)
            return ["someone"] if len(released) == 1 else []

    pruned: list[float] = []

    def prune() -> int:
        pruned.append(time.monotonic())
        return 0

    release = IdleRelease(Recording(), idle=0.2, prune=prune).start()  # type: ignore[arg-type]
    deadline = time.monotonic() + 5
    while len(released) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    release.close()
    count = len(released)
    time.sleep(0.2)
    assert count >= 3 and len(released) == count, released  # ran repeatedly, and not after close
    assert set(released) == {0.2}
    assert len(pruned) == count  # the doors' bookkeeping is pruned every round, released or not


def test_a_release_ends_the_idle_worker_threads_and_collects_what_the_users_left() -> None:
    """After a crowd, forty warm threads would wait out their idle time (each with its stack and
    allocator cache) and garbage cycles would wait for a full collection that slow traffic never
    triggers: a release lets go of both at once."""
    import asyncio
    import gc
    import threading
    import weakref

    from toolroute._workers import LOOKUPS, WORKERS
    from toolroute.serve.idle import IdleRelease

    class Session:  # stands for a user's objects, caught in a cycle
        def __init__(self) -> None:
            self.me = self

    barrier = threading.Barrier(6, timeout=20)

    async def crowd() -> None:
        await asyncio.gather(*(WORKERS.run(barrier.wait) for _ in range(6)))

    asyncio.run(crowd())
    assert WORKERS.threads >= 6
    settled = time.monotonic() + 20  # every thread back waiting, as after a crowd left
    while WORKERS.idle < WORKERS.threads and time.monotonic() < settled:
        time.sleep(0.01)
    gc.disable()  # only the release may collect
    try:
        left = Session()
        gone = weakref.ref(left)
        del left
        assert gone() is not None

        class Once:
            released = False

            def release_idle(self, idle: float) -> list[str]:
                first, self.released = not self.released, True
                return ["someone"] if first else []

        release = IdleRelease(Once(), idle=0.2).start()  # type: ignore[arg-type]
        deadline = time.monotonic() + 20
        while (WORKERS.threads or LOOKUPS.threads or gone() is not None) and time.monotonic() < deadline:
            time.sleep(0.02)
        release.close()
    finally:
        gc.enable()
    assert gone() is None
    assert WORKERS.threads == LOOKUPS.threads == 0


HEAP_CHILD = """
from toolroute.serve.heap import limit_arenas, return_freed_memory
print(limit_arenas())
return_freed_memory()
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's allocator")
def test_served_mode_asks_for_few_allocator_arenas_unless_told_otherwise() -> None:
    import os
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    for extra, expected in (({}, "True"), ({"MALLOC_ARENA_MAX": "8"}, "False")):
        child = subprocess.run(
            [sys.executable, "-c", HEAP_CHILD], capture_output=True, text=True, env={**env, **extra}, timeout=60
        )
        assert child.returncode == 0, child.stderr[-2000:]
        assert child.stdout.split() == [expected]


def test_served_sync_work_runs_on_the_warm_workers_not_anyio_threads(deployed: Path) -> None:
    """Key lookups (and door builds) go to the threads a release can end: anyio's idle threads
    end only when a later call prunes them, so a server kept forty of them after a crowd."""
    import asyncio
    import threading

    from toolroute.serve.auth import ApiKeyVerifier
    from toolroute.serve.store import UserStore

    store = UserStore(f"sqlite:///{deployed / 'users.db'}")
    try:
        store.add_user("alice")
        key = store.add_key("alice")
        verifier = ApiKeyVerifier(store)

        def anyio_threads() -> set[int | None]:
            return {t.ident for t in threading.enumerate() if t.name.startswith("AnyIO")}

        async def check() -> tuple[list[str | None], set[int | None]]:
            found = await asyncio.gather(*(verifier.verify_token(k) for k in (key, "nope", key)))
            return [None if t is None else t.subject for t in found], anyio_threads()  # before they end

        before = anyio_threads()
        subjects, during = asyncio.run(check())
        assert subjects == ["alice", None, "alice"]
        assert during <= before
    finally:
        store.close()


def test_the_gateway_loop_never_carries_the_callers_context() -> None:
    """A call hops onto the gateway's loop without its caller's context variables (a served
    user's workspace): else every task there, and every message the SDK's streams keep as their
    last, would hold them after the user left."""
    import contextvars

    from toolroute.mcp.loop import LoopThread

    var: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")

    async def seen() -> str:
        return var.get()

    loop = LoopThread("test-loop")
    try:
        var.set("alice")
        assert loop.run(seen()) == "none"

        async def from_another_loop() -> str:
            var.set("bob")
            return await loop.arun(seen())

        import asyncio

        assert asyncio.run(from_another_loop()) == "none"
    finally:
        loop.stop()
