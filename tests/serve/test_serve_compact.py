"""Served state gives its memory back (issue 62): the per-user and per-connection maps a crowd
grew are made again at their present size once the crowd has left, so no table sized for 300
users stays (with the memory of its time it pins) after they were released. Sizes are read with
`sys.getsizeof`, which counts a dict's or set's table: an emptied map that kept its table is
larger than a fresh one."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from toolroute import ToolRouter
from toolroute.serve.compact import WORTH_COMPACTING, Peak, compacted
from toolroute.serve.connections import ConnectionLimits
from toolroute.serve.limits import LimitBook, UserLimits
from toolroute.serve.list_changes import ListWatchers
from toolroute.serve.tenants import Tenancy

CROWD = 300


def _fresh_size(container: Any) -> int:
    return sys.getsizeof(type(container)())


def _as_small_as(container: Any, entries: dict[Any, Any] | set[Any]) -> bool:
    """Whether `container`'s table is no larger than a fresh map holding `entries`'s."""
    return sys.getsizeof(container) <= sys.getsizeof(type(container)(entries))


def test_compacted_keeps_order_and_type_and_drops_the_grown_table() -> None:
    grown = {n: str(n) for n in range(1000)}
    for n in range(998):
        del grown[n]
    again = compacted(grown)
    assert again == {998: "998", 999: "999"} and list(again) == [998, 999] and type(again) is dict
    assert sys.getsizeof(again) < sys.getsizeof(grown)
    peak = Peak()
    peak.grew(1000)
    assert not peak.due(200) and peak.due(125) and peak.most == 125  # at an eighth, then from there
    small = Peak()
    small.grew(40)
    assert not small.due(0)  # a table that never grew large is not worth a copy


def test_the_idle_release_leaves_the_per_user_maps_as_small_as_fresh_ones(deployed: Path) -> None:
    """A crowd of users takes doors, workspace contexts and requests; one of them is still in a
    request when the release comes (and so stays, with its entries). After the release every
    per-user map holds that one user only, in a table no larger than a fresh map's."""
    router = ToolRouter()
    tenancy = Tenancy(router, ["read_file"], [], workspace_template=str(deployed / "ws" / "{user}"))
    users = [f"u{n:03d}" for n in range(CROWD)]
    try:
        for user in users:
            with tenancy.serving(user):
                tenancy.door(user)
                tenancy.context(user)
        grown = {name: sys.getsizeof(getattr(tenancy, name)) for name in ("_last_seen", "_doors", "_contexts")}
        assert all(size > 4 * _fresh_size({}) for size in grown.values()), grown
        time.sleep(0.05)
        with tenancy.serving("u007"):  # a request in progress: its user is not released
            gone = tenancy.release_idle(idle=0.01)
            assert sorted(gone) == [u for u in users if u != "u007"]
            for name in ("_last_seen", "_doors", "_contexts", "_builds", "_busy", "_registered"):
                kept = getattr(tenancy, name)
                assert set(kept) <= {"u007"}, (name, list(kept)[:5])
                assert _as_small_as(kept, dict.fromkeys(kept)), (name, sys.getsizeof(kept))
            assert tenancy.present() == 1 and tenancy.context("u007").user_id == "u007"
        # Released users come back as before: a door and a context made anew, in their workspace.
        assert tenancy.context("u100").workspace_root == (deployed / "ws" / "u100").resolve()
        assert tenancy.door("u100") is tenancy.door("u100")
        time.sleep(0.05)
        assert sorted(tenancy.release_idle(idle=0.01)) == ["u007", "u100"]
        for name in ("_last_seen", "_doors", "_contexts", "_builds", "_busy", "_registered"):
            kept = getattr(tenancy, name)
            assert not kept and sys.getsizeof(kept) == _fresh_size(kept), name
    finally:
        router.close()


def test_pruned_rate_counters_and_list_watchers_leave_small_maps() -> None:
    now = [0.0]
    book = LimitBook(UserLimits(), clock=lambda: now[0])
    for n in range(CROWD):
        with book.call(f"u{n}"):
            pass
    now[0] = 30.0
    with book.call("late"):
        pass
    now[0] = 70.0
    assert book.prune() == CROWD and book.tracked() == 1  # late's call is within the minute
    assert _as_small_as(book._usage, dict.fromkeys(book._usage))

    class Connection:
        async def send_tool_list_changed(self) -> None:
            pass

    watchers = ListWatchers()
    kept = Connection()
    crowd = [Connection() for _ in range(CROWD)]

    async def list_all(seen: list[tuple[str, Connection]]) -> None:  # a tools/list each, on the serving loop
        for user, connection in seen:
            watchers.seen(user, SimpleNamespace(session=SimpleNamespace(_connection=connection)))

    asyncio.run(list_all([(f"u{n}", c) for n, c in enumerate(crowd)] + [("stays", kept)]))
    del crowd
    gc.collect()
    assert watchers.prune() == CROWD and watchers.users() == 1
    assert _as_small_as(watchers._connections, dict.fromkeys(watchers._connections))


class _Peer:
    def __init__(self, source: str) -> None:
        self.source, self.partial = source, False

    def unread(self) -> int:
        return 0

    def evict(self) -> None:
        raise AssertionError("nobody is over a cap here")


def test_admission_maps_shrink_as_a_crowds_connections_leave() -> None:
    """Connections from many sources arrive, some complete their heads, all but two leave: the
    open set and the waiting maps end small, and admission still counts the two right."""
    admission = ConnectionLimits(max_unauthenticated=4096, max_unauthenticated_per_source=4096).admission(
        authenticated=True
    )
    peers = [_Peer(f"10.0.{n // 200}.{n % 200}") for n in range(2 * CROWD)]
    for peer in peers:
        assert admission.arrive(peer)
    for peer in peers[::2]:
        admission.started(peer)  # its head came: it waits no more
    assert admission.open == 2 * CROWD and admission.waiting == CROWD
    stay = peers[-2:]
    for peer in peers[:-2]:
        admission.leave(peer)
    assert admission.open == 2 and admission.waiting == 1
    assert admission.waiting_from(stay[1].source) == 1 and admission.waiting_from(stay[0].source) == 0
    # Made again at each eighth of the peak while the crowd left (amortised): sized for at most
    # WORTH_COMPACTING entries now, whatever the crowd was.
    assert sys.getsizeof(admission._open) <= sys.getsizeof(set(range(WORTH_COMPACTING)))
    assert sys.getsizeof(admission._waiting) <= sys.getsizeof(dict.fromkeys(range(WORTH_COMPACTING)))
    assert sys.getsizeof(admission._by_source) <= sys.getsizeof(dict.fromkeys(range(WORTH_COMPACTING)))
    for peer in stay:
        admission.leave(peer)
    assert admission.open == 0 and admission.waiting == 0
