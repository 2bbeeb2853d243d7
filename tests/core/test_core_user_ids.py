"""User ids are checked at every door, by one rule (`[A-Za-z0-9_-]{1,64}`, naming.rs): anything
else is a ToolArgumentError naming the rule, never a raw exception, never a quiet mapping. The
service-id rule is one too (`naming.SERVICE_ID_RE`), for configs and the registry alike."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from _mcp_helpers import demo_stdio
from hypothesis import given, settings
from hypothesis import strategies as st

from toolroute import BuiltInToolContext, ToolRouter, naming
from toolroute.errors import ToolArgumentError, ToolRegistrationError
from toolroute.mcp import McpGateway
from toolroute.mcp.config import parse_server
from toolroute.naming import SERVICE_ID_RULE, USER_ID_RULE, UserId, validate_user_id
from toolroute.serve.store import StoreError, UserStore

RULE = re.compile(r"[A-Za-z0-9_-]{1,64}")

bad_ids = st.one_of(
    st.text(max_size=80).filter(lambda s: RULE.fullmatch(s) is None),
    st.sampled_from(["", "../../x", "a\x00b", "\uff41\uff42", "x" * 65, "\udc80", "a\udcffb", "a b", "é"]),
    st.integers(),
    st.binary(max_size=8),
)
good_ids = st.from_regex(RULE, fullmatch=True)


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Any:
    r = ToolRouter(context=BuiltInToolContext(tmp_path_factory.mktemp("ws")), gateway=McpGateway())
    yield r
    r.close()


def _doors(router: ToolRouter) -> dict[str, Callable[[Any], Any]]:
    return {
        "get_all_tools": lambda u: router.get_all_tools(["read_file"], None, u),
        "expose": lambda u: router.expose(["read_file"], None, u),
        "invoke": lambda u: router.invoke("glob", {"pattern": "*"}, u),
        "execute": lambda u: router.execute("glob", {"pattern": "*"}, u),
        "ainvoke": lambda u: anyio.run(router.ainvoke, "glob", {"pattern": "*"}, u),
        "aexecute": lambda u: anyio.run(router.aexecute, "glob", {"pattern": "*"}, u),
        "resolve": lambda u: router.resolve("glob", u),
        "route": lambda u: router.route("glob", u),
        "traits": lambda u: router.traits("glob", u),
        "get_user_mcp_tools": lambda u: router.get_user_mcp_tools(["svc"], u),
    }


@settings(max_examples=80, deadline=None)
@given(user=bad_ids, door=st.sampled_from(sorted(_doors(ToolRouter()))))
def test_every_door_refuses_a_bad_user_id_with_the_rule(router: ToolRouter, user: Any, door: str) -> None:
    with pytest.raises(ToolArgumentError, match=re.escape(USER_ID_RULE)):
        _doors(router)[door](user)


@settings(max_examples=40, deadline=None)
@given(user=good_ids)
def test_a_good_user_id_passes_every_door(router: ToolRouter, user: str) -> None:
    for door, call in _doors(router).items():
        if door == "get_user_mcp_tools":
            continue  # names a service this gateway does not have
        call(user)


@pytest.mark.parametrize("sid", ["", "a b", "x" * 65, "../etc", "svc:1", "é", 7])
def test_the_service_id_rule_is_one_for_configs_and_the_registry(tmp_path: Path, sid: Any) -> None:
    with pytest.raises(ToolRegistrationError, match=re.escape(SERVICE_ID_RULE)):
        parse_server(sid, {"command": "python3"})
    with UserStore(f"sqlite:///{tmp_path / 'u.db'}") as store:
        store.add_user("alice")
        with pytest.raises(StoreError, match=re.escape(SERVICE_ID_RULE)):
            store.add_server("alice", sid, {"command": "python3"})


# ---- the checked value: made once where the id enters, never checked again --------------------


@settings(max_examples=200, deadline=None)
@given(user=st.one_of(good_ids, bad_ids))
def test_a_user_id_value_is_made_exactly_when_the_rule_accepts(user: Any) -> None:
    try:
        validate_user_id(user)
    except ToolArgumentError:
        with pytest.raises(ToolArgumentError, match=re.escape(USER_ID_RULE)):
            UserId(user)
        return
    checked = UserId(user)
    assert (checked, hash(checked), str(checked)) == (user, hash(user), user)
    assert UserId.of(checked) is checked and UserId.optional(None) is None


class _Counted:
    """The one rule, counting how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, value: object) -> None:
        self.asked += 1
        validate_user_id(value)


def test_a_call_with_a_user_checks_the_id_once_through_router_and_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A user's own MCP server over real stdio: the call crosses the router (resolve, the
    # gateway's prepare and lookup) and the gateway's call path, each of which used to check.
    gateway = McpGateway()
    gateway.add_user_server("alice", "mine", demo_stdio("alicesrv", "lookup"))
    with ToolRouter(context=BuiltInToolContext(tmp_path), gateway=gateway) as router:
        assert "alicesrv" in router.invoke("lookup", {}, "alice")  # connected and listed
        counted = _Counted()
        monkeypatch.setattr(naming, "validate_user_id", counted)
        for _ in range(3):
            assert "alicesrv" in router.invoke("lookup", {}, "alice")
        assert counted.asked == 3  # once per call, where the plain string came in
        checked = UserId("alice")
        counted.asked = 0
        assert "alicesrv" in router.invoke("lookup", {}, checked)
        assert router.expose(None, ["mine"], checked).names and counted.asked == 0
        with pytest.raises(ToolArgumentError):
            router.invoke("lookup", {}, "al ice")  # the door still refuses
