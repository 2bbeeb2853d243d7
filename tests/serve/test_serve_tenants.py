"""Tenancy's per-user doors: served from a cache while the registry says the user's servers are
unchanged, built again on the next request after any process changed them (issue 43)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _serve_helpers import make_router

from toolroute import ToolRouter
from toolroute.mcp.gateway import McpGateway
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


def test_a_change_to_other_users_reads_nothing_again(store: CountingStore, tenancy: Tenancy) -> None:
    door = tenancy.door("alice")
    store.add_user("bob")  # through this store
    with UserStore(store.url) as elsewhere:  # and through another process's
        elsewhere.add_user("carol")
    assert tenancy.door("alice") is door
    assert store.reads == 1


def test_a_change_to_the_users_servers_made_elsewhere_is_seen_by_the_next_request(
    store: CountingStore, tmp_path: Path
) -> None:
    """No time bound to wait out: the registry's rows say at once that they changed."""
    router = ToolRouter(gateway=McpGateway())
    try:
        tenancy = Tenancy(router, [], [], store=store, registry_ttl=3600)
        door = tenancy.door("alice")
        assert tenancy.door("alice") is door and store.reads == 1
        with UserStore(store.url) as elsewhere:
            elsewhere.add_server("alice", "notes", {"url": "http://127.0.0.1:9/mcp"})  # never reached
        changed = tenancy.door("alice")
        assert changed is not door and store.reads == 2
        assert changed.request.user_servers == ("notes",)  # her server is handed to the gateway
        with UserStore(store.url) as elsewhere:
            elsewhere.remove_server("alice", "notes")
        assert tenancy.door("alice").request.user_servers == ()
        assert not router.gateway.has_service("notes", "alice")  # type: ignore[union-attr]
    finally:
        router.close()


def test_fresh_door_never_answers_for_a_registry_user(store: CountingStore, tenancy: Tenancy) -> None:
    """Only the registry can say whether a user's door is fresh, and the event loop may not ask
    it: `fresh_door` sends every registry user to `door`, which asks."""
    assert tenancy.fresh_door("alice") is None
    door = tenancy.door("alice")
    assert tenancy.fresh_door("alice") is None
    assert tenancy.cached_door("alice") is door  # what a handshake may read without waiting
