"""What served mode asks of the MCP gateway, as an interface of its own: its users' own servers
handed over and taken back, word of changed upstream tools, and the prompts, resources and
instructions of the servers an allowlist names. The router's seam (`routes.ToolGateway`) knows
none of this; `McpGateway` provides both."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from toolroute.mcp.credentials import UpstreamCredentials
from toolroute.mcp.offer import UpstreamOffer
from toolroute.naming import UserId
from toolroute.router import ToolRouter


@runtime_checkable
class Upstreams(Protocol):
    def add_user_server(
        self,
        user_id: str,
        service_id: str,
        server_config: Mapping[str, Any],
        *,
        auth: UpstreamCredentials | None = None,
    ) -> None:
        """Register a server of `user_id`'s own (served mode hands over the registry's); with
        `auth`, one the user authorizes with OAuth."""

    def remove_user_server(self, user_id: str, service_id: str) -> None:
        """Forget one of `user_id`'s own servers (its config changed, or it was removed)."""

    def remove_user(self, user_id: str) -> None:
        """Forget `user_id`'s own servers: their connections end and their tools leave the table
        (served mode's idle users); `add_user_server` adds them again."""

    def on_tools_changed(self, listener: Callable[[UserId | None], None]) -> None:
        """Call `listener(user_id)` once changed upstream tools are published: None for a shared
        server, else the user whose server it is (served mode tells listing clients)."""

    def offer_of(self, services: Sequence[tuple[str, str | None]]) -> UpstreamOffer:
        """The prompts, resources and instructions of `(service id, user id or None)` servers."""


def upstreams_of(router: ToolRouter) -> Upstreams | None:
    """The router's gateway as served mode's interface, when it provides it: the one place
    served mode finds it (wiring), never a way to call it."""
    gateway = router.gateway
    return gateway if isinstance(gateway, Upstreams) else None
