"""The launcher thread (every command's spawn) takes its owners in turn (issue 55): one tenant's
backlog of spawns does not hold another tenant's spawn behind all of it. Order, not time: the
launcher is held busy, the queues are filled, and the order the spawns then run in is read."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from toolroute._workers import working_for
from toolroute.builtins._process.launcher import Launcher

BOUND = 30.0  # seconds any wait here may take before the test fails instead of hanging


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_a_second_owners_spawn_is_served_before_the_first_owners_backlog() -> None:
    launcher = Launcher()
    order: list[str] = []
    busy, release = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        assert release.wait(BOUND)

    def spawn_as(owner: str, name: str, fn: Callable[[], object] | None = None) -> threading.Thread:
        def run() -> None:
            with working_for(owner):
                launcher.run(fn or (lambda: order.append(name)), lambda _: None)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    threads = [spawn_as("holder", "hold", hold)]
    _wait(busy.is_set, "the launcher to be busy")
    for n in range(8):  # the greedy tenant's eight loops, each with a spawn queued
        threads.append(spawn_as("greedy", f"greedy-{n}"))
        _wait(lambda n=n: launcher.waiting() == n + 1, "the greedy spawns to queue")
    threads.append(spawn_as("victim", "victim"))
    _wait(lambda: launcher.waiting() == 9, "the victim's spawn to queue")
    release.set()
    for thread in threads:
        thread.join(BOUND)
    assert len(order) == 9
    assert order.index("victim") == 1, order  # after one greedy spawn, not after all eight
    assert [name for name in order if name != "victim"] == [f"greedy-{n}" for n in range(8)]  # its own in order


def test_spawns_without_an_owner_keep_their_order() -> None:
    launcher = Launcher()
    order: list[int] = []
    threads = []
    for n in range(5):
        thread = threading.Thread(target=lambda n=n: launcher.run(lambda: order.append(n), lambda _: None))
        thread.start()
        thread.join(BOUND)
        threads.append(thread)
    assert order == list(range(5))
