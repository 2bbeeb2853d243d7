"""The gateway's one registry of servers: each registered server once, by key (a global server
by its service id, a user's by `user_{userId}_service_{serviceId}`), with the two views the
gateway asks for, the global servers in registration order and each user's own, kept beside it
and changed only here. Callers hold the gateway's lock."""

from __future__ import annotations

from dataclasses import dataclass, field

import mcp_types as types

from toolroute.errors import ToolError, ToolRegistrationError
from toolroute.mcp.config import ServerConfig
from toolroute.mcp.connection import Connection
from toolroute.mcp.projection import Declared
from toolroute.naming import UserId, user_service_key
from toolroute.types import ToolDefinition

RETRY_FAILED_AFTER = 5.0  # seconds a failed server is skipped by a refresh (explicit use retries at once)


@dataclass
class Service:
    """One registered server: its connection and what it last listed."""

    key: str
    service_id: str
    user_id: UserId | None  # checked where the server was added
    config: ServerConfig
    connection: Connection
    tools: list[types.Tool] | None = None  # None: not listed yet
    definitions: dict[str, ToolDefinition] = field(default_factory=dict)  # nameless, by the server's tool name
    declared: dict[str, Declared] = field(default_factory=dict)  # each tool as its server declared it
    stale: bool = False
    listed_on: int = 0  # the connection's `connects` count when the tools were listed
    error: ToolError | None = None
    failed_at: float = 0.0
    left_out: bool = False  # failed at start: retried in the background only (loading.py)

    def failed_recently(self, now: float) -> bool:
        return self.error is not None and now - self.failed_at < RETRY_FAILED_AFTER

    def needs_listing(self, now: float) -> bool:
        """Not listed yet (or its list changed), and not waiting out a recent failure or its
        background retry."""
        return (self.tools is None or self.stale) and not self.failed_recently(now) and not self.left_out


def service_key(service_id: str, user_id: UserId | None) -> str:
    return service_id if user_id is None else user_service_key(user_id, service_id)


class ServiceRegistry:
    def __init__(self) -> None:
        self._by_key: dict[str, Service] = {}
        self._global_ids: list[str] = []
        self._user_ids: dict[UserId, list[str]] = {}  # user -> service ids, in registration order

    def add(self, service: Service) -> None:
        if service.key in self._by_key:
            raise ToolRegistrationError(f"MCP service {service.key!r} is already registered")
        self._by_key[service.key] = service
        if service.user_id is None:
            self._global_ids.append(service.service_id)
        else:
            self._user_ids.setdefault(service.user_id, []).append(service.service_id)

    def get(self, key: str) -> Service | None:
        return self._by_key.get(key)

    def __getitem__(self, key: str) -> Service:
        return self._by_key[key]

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def all(self) -> list[Service]:
        return list(self._by_key.values())

    def global_ids(self) -> list[str]:
        return list(self._global_ids)

    def global_service(self, service_id: str) -> Service | None:
        return self._by_key[service_id] if service_id in self._global_ids else None

    def global_services(self) -> list[Service]:
        return [self._by_key[sid] for sid in self._global_ids]

    def user_service(self, user_id: UserId, service_id: str) -> Service | None:
        if service_id not in self._user_ids.get(user_id, ()):
            return None
        return self._by_key[user_service_key(user_id, service_id)]

    def user_services(self, user_id: UserId) -> list[Service]:
        return [self._by_key[user_service_key(user_id, sid)] for sid in self._user_ids.get(user_id, ())]

    def users(self) -> list[UserId]:
        """Users with servers of their own."""
        return list(self._user_ids)

    def has(self, service_id: str, user_id: UserId | None = None) -> bool:
        """A global server of that id, or (with `user_id`) one of the user's own."""
        return service_id in self._global_ids or (user_id is not None and service_id in self._user_ids.get(user_id, ()))

    def remove_user(self, user_id: UserId) -> list[Service]:
        """Every server of the user's own, gone from the registry."""
        ids = self._user_ids.pop(user_id, [])
        found = (self._by_key.pop(user_service_key(user_id, sid), None) for sid in ids)
        return [service for service in found if service is not None]

    def remove_user_service(self, user_id: UserId, service_id: str) -> Service | None:
        ids = self._user_ids.get(user_id, [])
        if service_id not in ids:
            return None
        ids.remove(service_id)
        return self._by_key.pop(user_service_key(user_id, service_id))
