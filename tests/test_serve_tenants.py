"""Tenancy's per-user doors: served from a cache, re-read from the registry after a bounded time,
at once after a change through the same store, and never caching what authentication decides."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _serve_helpers import make_router

from toolroute.serve.store import UserStore
from toolroute.serve.tenants import Tenancy

TTL = 0.5


class CountingStore(UserStore):
    """A real SQLite registry that counts the reads of users' servers."""

    reads = 0

    def servers(self, user_id: str) -> dict[str, dict[str, object]]:
        self.reads += 1
        return super().servers(user_id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    with CountingStore(f"sqlite:///{tmp_path / 'users.db'}") as store:
        store.add_user("alice")
        yield store


@pytest.fixture
def tenancy(store: CountingStore, tmp_path: Path) -> Iterator[Tenancy]:
    router = make_router(tmp_path)
    try:
        yield Tenancy(router, ["echo"], [], store=store, registry_ttl=TTL)
    finally:
        router.close()


def test_a_door_is_served_from_the_cache_within_the_ttl(store: CountingStore, tenancy: Tenancy) -> None:
    first = tenancy.door("alice")
    for _ in range(50):
        assert tenancy.door("alice") is first
    assert store.reads == 1


def test_a_change_through_the_same_store_is_seen_at_once(store: CountingStore, tenancy: Tenancy) -> None:
    tenancy.door("alice")
    store.add_user("bob")  # any change through this store invalidates every door
    tenancy.door("alice")
    assert store.reads == 2


def test_a_change_made_elsewhere_is_seen_within_the_ttl(store: CountingStore, tenancy: Tenancy) -> None:
    door = tenancy.door("alice")
    with UserStore(store.url) as elsewhere:  # another process's view of the same registry
        elsewhere.add_user("carol")
    assert tenancy.door("alice") is door and store.reads == 1  # not seen yet: the cache's bound
    time.sleep(TTL + 0.1)
    assert tenancy.door("alice") is door  # re-read; the user's servers did not change
    assert store.reads == 2


def test_fresh_door_answers_only_what_the_cache_may_serve(store: CountingStore, tenancy: Tenancy) -> None:
    assert tenancy.fresh_door("alice") is None  # never read: the caller must go to the registry
    door = tenancy.door("alice")
    assert tenancy.fresh_door("alice") is door
    store.add_user("dave")
    assert tenancy.fresh_door("alice") is None  # a change through the store: stale at once
    tenancy.door("alice")
    time.sleep(TTL + 0.1)
    assert tenancy.fresh_door("alice") is None  # past the TTL
    assert store.reads == 2
