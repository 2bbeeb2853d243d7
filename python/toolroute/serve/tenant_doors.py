"""Per-request identity in served mode: each request lists and calls the tools of the user its
verified token names, through that user's door (`Tenancy`), inside that user's workspace, under
the per-user limits, with one audit line per call."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

from toolroute._workers import LOOKUPS, run_off_loop, working_for
from toolroute.allowlist import CallOutcome, OutcomeKind, inner_reply
from toolroute.asking import asking, current_asker
from toolroute.codemode import InnerCaller, InnerReply, inner_calls_through, is_code_tool
from toolroute.context import builtin_tool_context
from toolroute.errors import ToolError
from toolroute.naming import UserId
from toolroute.policy.tools import DECISIONS
from toolroute.serve.approval import AskForApproval, current_approval
from toolroute.serve.asking import PassInputRequired
from toolroute.serve.auth import request_token, request_user
from toolroute.serve.doors import CALL_KINDS, ServedTools, ServerContext
from toolroute.serve.list_changes import EVERYONE, ListWatchers, connection_of, subscribe
from toolroute.serve.question_audit import audit_passed_back, audited
from toolroute.serve.tenants import Tenancy

if TYPE_CHECKING:
    from toolroute.policy import Subject
    from toolroute.policy.rules import Verdict
    from toolroute.serve.audit import AuditLog
    from toolroute.serve.limits import LimitBook
    from toolroute.serve.metrics import Metrics
    from toolroute.serve.policy_watch import PolicyWatch
    from toolroute.serve.tasks import TaskLimits
    from toolroute.serve.tracing import ServedTracing
    from toolroute.types import Tool

AFFINITY_HEADER = "x-toolroute-user"
VOLATILE_CLAIMS = frozenset({"exp", "iat", "nbf", "jti"})


def request_claims(ctx: ServerContext) -> dict[str, Any]:
    """What the policy's `user.claims` are for this request: the verified JWT's claims, or the
    registry's attributes of an API key's user (both put on the token by `serve/auth.py`)."""
    request = getattr(ctx, "request", None)
    user = None if request is None else request.scope.get("user")
    token = getattr(user, "access_token", None)
    claims = getattr(token, "claims", None)
    if not isinstance(claims, Mapping):
        return {}
    # A token's times and id change with every token of the same user and grants: left out, so
    # a user's view is made again when what it grants changes, not each time a token is renewed.
    return {k: v for k, v in claims.items() if k not in VOLATILE_CLAIMS}


def _rule_ids(decisions: list[Verdict]) -> tuple[str, ...] | None:
    return tuple(v.rule or "default" for v in decisions) or None


def affinity_claim(ctx: ServerContext) -> str | None:
    """The user a load balancer hashed this request on (the `X-Toolroute-User` header), if any."""
    request = getattr(ctx, "request", None)
    return None if request is None else request.headers.get(AFFINITY_HEADER)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


class TenantDoors:
    """Per-request identity: each request lists and calls the tools of the user its token names.

    A request that reaches here without a verified user (which the auth middleware prevents)
    is refused rather than served as anybody.
    """

    task_limits: TaskLimits | None = None  # the bounds of the calls its server runs as tasks (serve/tasks.py)

    def __init__(
        self,
        tenancy: Tenancy,
        *,
        limits: LimitBook | None = None,
        audit: AuditLog | None = None,
        authenticated: bool = True,
        fixed_user: str | None = None,
        policy: PolicyWatch | None = None,
        metrics: Metrics | None = None,
        tracing: ServedTracing | None = None,
    ) -> None:
        self.tenancy = tenancy
        self.tracing = tracing
        self.policy = policy
        self.metrics = metrics
        self.limits = limits
        self.audit = audit
        self.authenticated = authenticated
        self.fixed_user = UserId.optional(fixed_user)
        self.watchers = ListWatchers()
        subscribe(tenancy.upstreams, self._tools_changed)

    @property
    def one_view(self) -> bool:
        """Without authentication every request is the one fixed user's: the same listings."""
        return not self.authenticated

    def prune(self) -> int:
        """Let go of per-user bookkeeping nobody needs any more: counters of users quiet for a
        minute, connection sets of users with none open (run by the idle release's rounds).
        Returns how many entries went."""
        counters = 0 if self.limits is None else self.limits.prune()
        return counters + self.watchers.prune()

    def quiet(self) -> bool:
        """Nobody here: every user released (unseen for the idle timeout), no call running (a
        call longer than the timeout outlives its user's release) and no background process
        running (a released user's run on, and a recycle would end them)."""
        # Without the limits' counters, calls running are not known: never quiet.
        return (
            self.limits is not None
            and self.tenancy.present() == 0
            and self.limits.running() == 0
            and self.tenancy.background_running() == 0
        )

    def _tools_changed(self, user_id: UserId | None) -> None:
        """A shared server's change reaches every user; a user's own server's, that user."""
        self.tenancy.forget_doors(user_id)
        self.watchers.changed(EVERYONE if user_id is None else user_id)

    def _policy_now(self) -> None:
        """The policy file changed on disk: the new policy applies from this request on (every
        door is exposed anew, and listening clients are told their lists changed)."""
        if self.policy is not None and self.policy.check():
            self.tenancy.router.policy = self.policy.policy
            self.tenancy.forget_doors(None)
            self.watchers.changed(EVERYONE)

    def _subject(self, ctx: ServerContext, user: UserId | None) -> Subject | None:
        if self.policy is None:
            return None
        from toolroute.policy import Subject

        claims = request_claims(ctx) if self.authenticated else {}
        return Subject(user, claims, "http" if getattr(ctx, "request", None) is not None else "stdio")

    def _note_bearer(self, ctx: ServerContext, user: UserId | None) -> None:
        """The user's own JWT, for upstream servers that exchange it (RFC 8693, upstream_oauth/)."""
        oauth = self.tenancy.oauth
        if oauth is None or user is None:
            return
        token = request_token(ctx)
        if token is not None and not token.token.startswith("trk_"):
            oauth.note_subject(user, token.token, token.expires_at)

    def _user(self, ctx: ServerContext) -> UserId | None:
        if not self.authenticated:
            return self.fixed_user
        user = request_user(ctx)
        if user is None:
            raise ToolError("this request carries no verified identity")
        claimed = affinity_claim(ctx)
        if claimed is not None and claimed != user:
            # The header only steers the load balancer; a request that names another user
            # there is refused, so the header can never be used to land beside another tenant.
            raise ToolError(f"the {AFFINITY_HEADER} header does not name the authenticated user")
        return user

    async def list_tools(self, ctx: ServerContext) -> list[types.Tool]:
        try:
            user = self._user(ctx)
        except ToolError as exc:
            raise MCPError(INVALID_REQUEST, str(exc)) from None
        with self.tenancy.serving(user):
            self._note_bearer(ctx, user)
            door = await self._door(user, self._subject(ctx, user))
            self.watchers.seen(user, ctx)
            return door.mcp_tools_for(connection_of(ctx))

    async def call_tool(
        self, ctx: ServerContext, name: str, arguments: Mapping[str, Any] | None
    ) -> types.CallToolResult:
        """One call, and exactly one audit line for it on every path: done, failed, refused
        (identity, allowlist, limits) or cancelled (by the client or its disconnect)."""
        started = time.monotonic()
        user: str | None = None
        result: types.CallToolResult | None = None
        outcome, tool = "cancelled", None
        decisions: list[Verdict] = []  # the policy's, on this call
        kinds: list[str] = []  # the call's outcome kind, for the metrics and traces
        counting = CALL_KINDS.set(kinds) if self.metrics is not None or self.tracing is not None else None
        try:
            try:
                user = self._user(ctx)
            except ToolError as exc:
                user = request_user(ctx)
                result, outcome = _error(str(exc)), "refused"
                return result
            with self.tenancy.serving(user):
                self._note_bearer(ctx, user)
                subject = self._subject(ctx, user)
                noted = DECISIONS.set(decisions) if subject is not None else None
                try:
                    if self.tracing is None:
                        result, outcome, tool = await self._call(user, name, arguments, connection_of(ctx), subject)
                    else:
                        result, outcome, tool = await self._traced(ctx, user, name, arguments, subject, kinds)
                finally:
                    if noted is not None:
                        DECISIONS.reset(noted)
                held = current_approval()
                ran = held is not None and held.granted  # a person approved: a failure is the tool's
                if outcome == "error" and decisions and decisions[-1].effect != "allow" and not ran:
                    outcome = "refused"  # the policy's no (or its wait for a person), not the tool's failure
            return result
        except PassInputRequired:
            outcome = "input_required"  # the upstream's questions went back to the client
            raise
        except Exception:
            outcome = "error"
            raise
        finally:
            if self.audit is not None:
                approval = current_approval()
                answer = None if approval is None else approval.answer
                self._audit(user, name, arguments, started, outcome, result, tool, _rule_ids(decisions), answer)
            if counting is not None:
                CALL_KINDS.reset(counting)
                if self.metrics is not None:
                    self._count(name, tool, outcome, kinds, started)

    async def _traced(
        self,
        ctx: ServerContext,
        user: UserId | None,
        name: str,
        arguments: Mapping[str, Any] | None,
        subject: Subject | None,
        kinds: list[str],
    ) -> tuple[types.CallToolResult, str, Tool | None]:
        """`_call` inside an `execute_tool` span, the child of the client's `traceparent`."""
        from toolroute.serve.tracing import finished

        assert self.tracing is not None
        call_id = str(getattr(ctx, "request_id", "") or "")
        started = time.monotonic()
        with self.tracing.span(name, arguments, getattr(ctx, "meta", None), call_id) as finish:
            answer = await self._call(user, name, arguments, connection_of(ctx), subject)
            kind = kinds[-1] if kinds else answer[1]
            finish(finished(name, call_id, answer[0], kind, time.monotonic() - started))
        return answer

    def _count(self, name: str, tool: Tool | None, outcome: str, kinds: list[str], started: float) -> None:
        from toolroute.serve.metrics import outcome_label, tool_label

        assert self.metrics is not None
        if kinds:  # the call reached the door: its own kind
            kind = outcome_label(kinds[-1])
        elif outcome == "refused":  # identity or limits: before any tool
            kind = "refused"
        else:
            kind = "cancelled" if outcome == "cancelled" else "failed"
        self.metrics.observe(tool_label(name, tool), kind, time.monotonic() - started)

    def _audit(
        self,
        user: str | None,
        name: str,
        arguments: Mapping[str, Any] | None,
        started: float,
        outcome: str,
        result: types.CallToolResult | None,
        tool: Tool | None,
        policy: tuple[str, ...] | None = None,
        approval: str | None = None,
    ) -> None:
        assert self.audit is not None
        content = () if result is None else result.content
        self.audit.record(
            user=user,
            tool=name,
            started=started,
            outcome=outcome,
            result_chars=sum(len(c.text) for c in content if isinstance(c, types.TextContent)),
            arguments=arguments,
            level=None if tool is None else routing_level(tool),
            server=None if tool is None else getattr(tool, "service_id", None),
            policy=policy,
            approval=approval,
        )

    async def _call(
        self,
        user: UserId | None,
        name: str,
        arguments: Mapping[str, Any] | None,
        connection: Any = None,
        subject: Subject | None = None,
    ) -> tuple[types.CallToolResult, str, Tool | None]:
        """The result, the audit outcome, and the tool that ran (None when refused)."""
        door = await self._door(user, subject)
        tool = door.exposure.get(name)  # the very tool this user was shown under `name`
        if tool is None:
            kinds = CALL_KINDS.get()
            if kinds is not None:
                kinds.append("not_found")
            hiding = door.exposure.policy_hidden.get(name)
            noted = DECISIONS.get()
            if hiding is not None and noted is not None:
                noted.append(hiding)  # the rule that hides it, in the audit (the client hears "not served")
            return door.call_refusal(name), "refused", None
        try:
            if self.limits is not None:
                self.limits.check_arguments(arguments)
            context = self.tenancy.context(user)
            # The user's work takes the user's share of the worker threads (`_workers.py`); a
            # code program's calls are limited and audited one by one, as the client's own are.
            inner = self._inner_calls(user, door, name) if is_code_tool(tool) else None
            with (
                self._slot(user),
                working_for(user),
                inner_calls_through(inner) if inner is not None else contextlib.nullcontext(),
                self._questions_audited(user, name, tool),
            ):
                if context is None:
                    result = await door.call(name, arguments, connection)
                else:
                    with builtin_tool_context(context):
                        result = await door.call(name, arguments, connection)
        except PassInputRequired as passed:
            if self.audit is not None and not isinstance(passed, AskForApproval):  # the upstream's, not ours
                audit_passed_back(self.audit, user, name, getattr(tool, "service_id", None), passed.result)
            raise
        except ToolError as exc:
            return _error(str(exc)), "refused", None
        return result, "error" if result.is_error else "ok", tool

    def _questions_audited(self, user: UserId | None, name: str, tool: Tool) -> contextlib.AbstractContextManager[Any]:
        """The call's client, each of whose upstream's questions leaves an audit line."""
        asker = current_asker()
        if self.audit is None or asker is None:
            return contextlib.nullcontext()
        return asking(audited(asker, self.audit, user, name, getattr(tool, "service_id", None)))

    def _inner_calls(self, user: UserId | None, door: ServedTools, caller: str) -> InnerCaller:
        """A code program's calls through `door`: each within the user's argument size and calls
        per minute (the program's own call holds the concurrency slot its calls share), each with
        its audit line naming `caller`."""
        audit, limits = self.audit, self.limits

        def call(name: str, arguments: Mapping[str, Any], callable_: bool) -> InnerReply:
            started = time.monotonic()
            try:
                if limits is not None and callable_ and user is not None:
                    limits.check_arguments(arguments)
                    limits.count(user)
            except ToolError as exc:
                outcome = CallOutcome(str(exc), OutcomeKind.REFUSED)
                decisions: list[Verdict] = []
            else:
                decisions = []
                noted = DECISIONS.set(decisions)
                try:
                    outcome = door.inner_outcome(name, arguments, callable_)
                finally:
                    DECISIONS.reset(noted)
            if audit is None:
                return inner_reply(outcome)
            tool = door.exposure.get(name)
            hiding = door.exposure.policy_hidden.get(name) if tool is None else None
            if hiding is not None:
                decisions.append(hiding)  # a tool the policy hides from this user: its rule
            audit.record(
                user=user,
                tool=name,
                started=started,
                outcome=_audit_outcome(outcome),
                result_chars=len(outcome.text),
                arguments=arguments,
                level=None if tool is None else routing_level(tool),
                server=None if tool is None else getattr(tool, "service_id", None),
                caller=caller,
                policy=_rule_ids(decisions),
            )
            return inner_reply(outcome)

        return call

    async def _door(self, user: UserId | None, subject: Subject | None = None) -> ServedTools:
        # A fresh cached door is served on the loop; reading the registry goes to a thread.
        self._policy_now()
        door = self.tenancy.fresh_door(user)
        if door is not None and subject is not None and door.policy_subject != subject:
            # The user's claims changed (another token): the policy's view of them may too.
            self.tenancy.forget_doors(user)
            door = None
        if door is None:
            door = await run_off_loop(functools.partial(self._build_door, user, subject), LOOKUPS)
            await door.read_instructions()  # a new door: read for later handshakes
        return door

    def _build_door(self, user: UserId | None, subject: Subject | None) -> ServedTools:
        if subject is None:
            return self.tenancy.door(user)
        from toolroute.policy import policy_subject

        with policy_subject(subject):  # the exposure is made as the policy sees this caller
            door = self.tenancy.door(user)
            if door.policy_subject is not None and door.policy_subject != subject:
                self.tenancy.forget_doors(user)  # made for other claims (the registry's cache)
                door = self.tenancy.door(user)
        door.policy_subject = subject
        return door

    @contextlib.asynccontextmanager
    async def offering(self, ctx: ServerContext) -> AsyncIterator[ServedTools]:
        """The caller's door, for its upstream servers' prompts, resources and templates, for
        the request's length (the user is not released meanwhile); a prompt fetched or a
        resource read is audited like a call."""
        try:
            user = self._user(ctx)
        except ToolError as exc:
            raise MCPError(INVALID_REQUEST, str(exc)) from None
        with self.tenancy.serving(user):
            door = await self._door(user, self._subject(ctx, user))
            yield door if self.audit is None else _AuditedOffer(door, self.audit, user)  # type: ignore[misc]

    async def ready_instructions(self) -> None:
        """Before serving: without authentication there is one door, built now, so the first
        handshake already carries its upstream servers' instructions."""
        if not self.authenticated:
            await self._door(self.fixed_user)

    def instructions(self) -> str | None:
        """The connecting user's upstream servers' instructions, once that user's door is built
        (a handshake cannot wait for a registry read or an upstream connect)."""
        token = get_access_token()
        user = self.fixed_user if not self.authenticated else (None if token is None else UserId.of(token.subject))
        door = self.tenancy.cached_door(user) if user is not None or not self.authenticated else None
        return None if door is None else door.known_instructions()

    def _slot(self, user: UserId | None) -> Any:
        if self.limits is None or user is None:
            return contextlib.nullcontext()
        return self.limits.call(user)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        # The SDK validates arguments against this before calling; the schema of a name is the
        # same for every user who can see it (user-level names are unique to their user).
        return None


def _audit_outcome(outcome: CallOutcome) -> str:
    if not outcome.is_error:
        return "ok"
    refused = (OutcomeKind.NOT_FOUND, OutcomeKind.REFUSED, OutcomeKind.APPROVAL_NEEDED)
    return "refused" if outcome.kind in refused else "cancelled" if outcome.kind is OutcomeKind.CANCELLED else "error"


def routing_level(tool: Tool) -> str:
    """The audit's routing level of a tool: its kind's name (`builtin`, `user_mcp`, `local_mcp`,
    `function`, `global_mcp`), from the one definition of kinds (the Rust `ToolKind`)."""
    return tool.kind.key


class _AuditedOffer:
    """A user's door whose `prompts/get` and `resources/read` each leave one audit line (level
    `prompt` or `resource`; the tool field names the prompt or the URI), whatever the outcome."""

    def __init__(self, door: ServedTools, audit: AuditLog, user: str | None) -> None:
        self._door, self._audit, self._user = door, audit, user

    def __getattr__(self, name: str) -> Any:
        return getattr(self._door, name)  # the listings pass as they are

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        with self._audited("prompt", name, arguments):
            return await self._door.get_prompt(name, arguments)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        with self._audited("resource", uri, None):
            return await self._door.read_resource(uri)

    @contextlib.contextmanager
    def _audited(self, level: str, name: str, arguments: Mapping[str, Any] | None) -> Any:
        started, outcome = time.monotonic(), "cancelled"
        try:
            yield
            outcome = "ok"
        except Exception:
            outcome = "error"
            raise
        finally:
            self._audit.record(
                user=self._user, tool=name, started=started, outcome=outcome, result_chars=0,
                arguments=arguments, level=level,
            )  # fmt: skip
