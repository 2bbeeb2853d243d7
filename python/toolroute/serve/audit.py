"""The audit log of served mode: one JSON line per call, appended and fsynced.

A record says who called what and how it went (time, user, tool, routing level, upstream server,
duration, outcome, result size). Argument values are never written: the names of the arguments
are, which is what an audit needs, and a value a tool marks secret cannot leak through a log that
holds no values at all.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from toolroute.agent.persistence import JsonlAppender


@dataclass(frozen=True)
class AuditRecord:
    time: float
    user: str | None
    tool: str
    level: str | None  # the routing level: builtin, user_mcp, local_mcp, function, global_mcp
    server: str | None  # the upstream MCP server, for MCP levels
    duration_ms: float
    outcome: str  # "ok", "error", "refused", "cancelled" or "input_required" (issue 60)
    result_chars: int
    argument_names: tuple[str, ...]
    caller: str | None = None  # the code tool whose program made this call, if one did
    # The operator's policy's decisions on this call: each rule id ("default" for the policy's
    # default); None when no policy decided (none in force, or the call never reached a tool).
    policy: tuple[str, ...] | None = None
    # A call the policy held for a person: what its client answered (accept, decline, cancel), or
    # "unasked" (a client that cannot be asked); None when no rule held it.
    approval: str | None = None
    # A question an upstream put to the caller during the call (level "question", issue 60):
    # what kind ("elicitation (form)", "sampling", "roots", ...); never its content.
    question: str | None = None
    # A task the gateway ran a call as (level "task", issue 60): its id, on its creation's line
    # and its end's.
    task: str | None = None


@dataclass(frozen=True)
class NetworkAuditRecord:
    """A connection a tenant's command asked the egress proxy for and was refused
    (`--network-allow`): who, where to, and the rule's words (the command saw the same)."""

    time: float
    user: str | None
    event: str  # "network"
    destination: str  # host:port as the command asked for it
    via: str  # "http", "connect" (HTTPS and other tunnels) or "socks5"
    outcome: str  # "refused"
    reason: str


class AuditLog:
    """Appends `AuditRecord`s to a JSONL file (O_APPEND, one write per line, fsync per record)."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self._out = JsonlAppender(path, fsync=fsync)

    @property
    def path(self) -> Any:
        return self._out.path

    def record(
        self,
        *,
        user: str | None,
        tool: str,
        started: float,
        outcome: str,
        result_chars: int,
        arguments: Mapping[str, Any] | None,
        level: str | None = None,
        server: str | None = None,
        caller: str | None = None,
        policy: tuple[str, ...] | None = None,
        approval: str | None = None,
        question: str | None = None,
        task: str | None = None,
    ) -> AuditRecord:
        entry = AuditRecord(
            time=time.time(),
            user=user,
            tool=tool,
            level=level,
            server=server,
            duration_ms=round((time.monotonic() - started) * 1000, 3),
            outcome=outcome,
            result_chars=result_chars,
            argument_names=tuple(sorted(arguments or {})),
            caller=caller,
            policy=policy,
            approval=approval,
            question=question,
            task=task,
        )
        self._out.append(json.dumps(asdict(entry), ensure_ascii=False))
        return entry

    def network_refused(self, *, user: str | None, host: str, port: int, via: str, reason: str) -> None:
        entry = NetworkAuditRecord(time.time(), user, "network", f"{host}:{port}", via, "refused", reason)
        self._out.append(json.dumps(asdict(entry), ensure_ascii=False))

    def close(self) -> None:
        self._out.close()
