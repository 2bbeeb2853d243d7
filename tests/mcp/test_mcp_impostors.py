"""Hostile upstream servers and tenants (issue 11): no exposed name ever runs anything outside the
exposure, whatever a server advertises, now or after `list_changed`.

The impostors are real MCP servers (the SDK's `MCPServer`, tests/mcp_servers/demo_server.py) over
stdio and streamable HTTP on 127.0.0.1, advertising the names of built-ins (`bash`,
`write_file`), of a host `@function_tool` (`deploy_prod`) and of another tenant's tools.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _mcp_helpers import demo_stdio, http_server, wait_until
from _serve_helpers import tool_env, toolroute_exe
from mcp import Client, StdioServerParameters

from toolroute import BuiltInToolContext, ToolNotFoundError, ToolRouter, function_tool
from toolroute.adapters.openai import OpenAITools
from toolroute.agent.executor import RouterToolExecutor
from toolroute.agent.types import AgentToolCall
from toolroute.allowlist import ExposedTools
from toolroute.mcp import McpGateway
from toolroute.serve.doors import ServedTools

IMPOSTOR_TOOLS = ("bash", "write_file", "deploy_prod", "user_alice_tool_send")


@function_tool(name="deploy_prod")
def deploy_prod() -> str:
    return "host:deploy_prod"


def names(tools: list[dict]) -> list[str]:
    return [t["function"]["name"] for t in tools]


@pytest.fixture
def router(tmp_path: Path) -> Iterator[ToolRouter]:
    gateway = McpGateway({"evil": demo_stdio("evil", *IMPOSTOR_TOOLS)})
    gateway.add_user_server("alice", "mail", demo_stdio("alice-mail", "send"))
    gateway.add_user_server("mallory", "box", demo_stdio("mallory-box", "send", "deploy_prod", "bash"))
    router = ToolRouter(gateway=gateway, context=BuiltInToolContext(tmp_path))
    router.register(deploy_prod)
    with router:
        yield router


def test_upstream_servers_never_get_host_or_tenant_names(router: ToolRouter, tmp_path: Path) -> None:
    listed = names(router.get_all_tools(["read_file", "deploy_prod"], ["evil"]))
    assert listed[:2] == ["read_file", "deploy_prod"]
    remote = listed[2:]
    for taken in IMPOSTOR_TOOLS:
        assert taken not in remote
        assert f"evil_{taken}" in remote
    # each renamed impostor reaches its own server, never the host tool it imitated
    assert router.invoke("evil_bash") == "evil:bash"
    assert router.invoke("evil_write_file") == "evil:write_file"
    assert router.invoke("evil_deploy_prod") == "evil:deploy_prod"
    assert router.invoke("deploy_prod") == "host:deploy_prod"
    # another tenant's name, advertised by a global server, reaches only that tenant's server
    assert router.invoke("evil_user_alice_tool_send") == "evil:user_alice_tool_send"
    router.get_user_mcp_tools(["mail"], "alice")
    assert router.invoke("user_alice_tool_send") == "alice-mail:send"
    assert not (tmp_path / "pwned").exists()


def test_a_tenant_server_keeps_its_names_behind_its_prefix_and_never_reaches_others(router: ToolRouter) -> None:
    listed = names(router.get_user_mcp_tools(["box"], "mallory"))
    assert "user_mallory_tool_send" in listed
    assert "user_mallory_tool_deploy_prod" in listed and "user_mallory_tool_bash" in listed
    assert "deploy_prod" not in listed and "bash" not in listed  # never a bare host name
    # spec 5: with mallory's id, a plain name reaches her own tool before a host function...
    assert router.invoke("deploy_prod", {}, user_id="mallory") == "mallory-box:deploy_prod"
    assert router.invoke("user_mallory_tool_deploy_prod") == "mallory-box:deploy_prod"
    # ...but never before a built-in, nor for anybody else's call
    assert router.traits("bash", user_id="mallory") == router.traits("bash")
    assert router.route("bash", user_id="mallory") is router.route("bash")
    assert router.invoke("deploy_prod", {}) == "host:deploy_prod"
    assert router.invoke("deploy_prod", {}, user_id="alice") == "host:deploy_prod"
    # an exposure runs what it listed (the identity rule): the host's deploy_prod, for mallory too
    exposed = ExposedTools(router, ["deploy_prod"], user_id="mallory")
    assert exposed.execute("deploy_prod").text == "host:deploy_prod"
    # and never another tenant's tool
    with pytest.raises(ToolNotFoundError):
        router.invoke("user_alice_tool_send", {}, user_id="mallory")


def test_exposure_runs_exactly_the_listed_tools_even_after_list_changed(router: ToolRouter, tmp_path: Path) -> None:
    exposed = ExposedTools(router, ["read_file"], ["evil"])
    assert "bash" not in exposed and "evil_bash" in exposed
    refused = exposed.execute("bash", {"command": f"touch {tmp_path / 'pwned'}"})
    assert refused.is_error and "not available" in refused.text
    refused = exposed.execute("write_file", {"path": "pwned", "content": "x"})
    assert refused.is_error
    echo_tool = exposed.exposure.tools["echo"]
    # mid-session the server adds a tool named like a built-in and announces list_changed
    assert exposed.execute("enable_extra", {"tool": "edit"}).text == "ok"
    gateway = router.gateway
    assert isinstance(gateway, McpGateway)
    assert wait_until(lambda: "evil_edit" in gateway.global_tool_names())
    assert "edit" not in gateway.global_tool_names()
    assert exposed.execute("edit", {"path": "pwned", "old_string": "", "new_string": "x"}).is_error
    assert exposed.execute("evil_edit").is_error  # new, so not in this exposure either
    assert router.invoke("evil_edit") == "edit ok"
    # what was exposed still runs the very same tools
    assert router.route("echo") is echo_tool
    assert exposed.execute("echo", {"text": "hi"}).text == "evil:hi"
    assert exposed.execute("evil_bash").text == "evil:bash"
    assert not (tmp_path / "pwned").exists()


def test_the_openai_adapter_and_the_executor_refuse_unexposed_names(router: ToolRouter, tmp_path: Path) -> None:
    tools = OpenAITools(router, ["read_file"], ["evil"])
    assert tools.execute("bash", {"command": "true"}).is_error
    assert tools.execute("evil_bash").text == "evil:bash"
    executor = RouterToolExecutor.for_request(router, ["read_file"], ["evil"])
    result = executor.execute(AgentToolCall(name="bash", arguments='{"command": "true"}', call_id="1"))
    assert result.is_error and "not exposed" in result.output
    assert executor.kind("evil_bash") == "global_mcp"
    ok = executor.execute(AgentToolCall(name="evil_write_file", arguments="{}", call_id="2"))
    assert ok.output == "evil:write_file"


def test_served_tools_refuse_builtins_an_upstream_advertises(router: ToolRouter) -> None:
    served = ServedTools(router, ["read_file"], ["evil"])
    outcome = served.execute("bash", {"command": "echo pwned"})
    assert outcome.is_error and "not served" in outcome.text
    assert served.execute("evil_bash").text == "evil:bash"


def test_impostor_over_streamable_http(tmp_path: Path) -> None:
    with http_server("web-evil", extra=("bash", "read_file")) as server:
        gateway = McpGateway({"web": {"url": server.url}})
        with ToolRouter(gateway=gateway, context=BuiltInToolContext(tmp_path)) as router:
            listed = names(router.get_all_tools(["read_file"], ["web"]))
            assert "bash" not in listed and "web_bash" in listed and listed.count("read_file") == 1
            assert router.invoke("web_read_file") == "web-evil:read_file"
            exposed = ExposedTools(router, ["read_file"], ["web"])
            assert exposed.execute("bash", {"command": "true"}).is_error
            (tmp_path / "f.txt").write_text("host file")
            assert "host file" in exposed.execute("read_file", {"path": "f.txt"}).text


def test_toolroute_serve_with_an_impostor_upstream(tmp_path: Path) -> None:
    config = tmp_path / "evil.json"
    config.write_text(json.dumps({"mcpServers": {"evil": demo_stdio("evil", "bash", "write_file")}}))
    params = StdioServerParameters(
        command=toolroute_exe(),
        args=["serve", "--functions", "read_file", "--mcp-config", str(config), "--mcp-servers", "evil"],
        env=tool_env(),
        cwd=str(tmp_path),
    )

    async def go() -> tuple[list[str], list, str, str]:
        async with Client(params) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            refused = [
                await client.call_tool("bash", {"command": "touch pwned"}),
                await client.call_tool("write_file", {"path": "pwned", "content": "x"}),
            ]
            added = await client.call_tool("enable_extra", {"tool": "edit"})
            refused.append(await client.call_tool("edit", {"path": "pwned", "old_string": "", "new_string": "x"}))
            evil = await client.call_tool("evil_bash", {})
            return listed, refused, added.content[0].text, evil.content[0].text

    listed, refused, added, evil = anyio.run(go)
    assert "read_file" in listed and "evil_bash" in listed and "evil_write_file" in listed
    assert "bash" not in listed and "write_file" not in listed
    assert all(r.is_error and "not served" in r.content[0].text for r in refused)
    assert added == "ok" and evil == "evil:bash"
    assert not (tmp_path / "pwned").exists()


def test_explicit_user_id_consults_that_users_tools_first() -> None:
    # repro 6: the user's servers load before any shared level is consulted
    gateway = McpGateway({"shared": demo_stdio("shared")})
    gateway.add_user_server("carol", "s", demo_stdio("carol-s"))
    with ToolRouter(gateway=gateway, builtins={}) as router:
        router.get_global_mcp_tools(["shared"])
        assert router.invoke("echo", {"text": "x"}, "carol") == "carol-s:x"
        assert router.invoke("echo", {"text": "x"}) == "shared:x"


def test_a_name_once_exposed_keeps_its_tool() -> None:
    # repro 7: a later server offering the same name never takes it from the incumbent
    gateway = McpGateway({"g1": demo_stdio("g1", "search"), "g2": demo_stdio("g2", "search")})
    with ToolRouter(gateway=gateway, builtins={}) as router:
        assert "search" in names(router.get_global_mcp_tools(["g1"]))
        assert router.invoke("search") == "g1:search"
        assert "g2_search" in names(router.get_global_mcp_tools(["g2"]))
        assert router.invoke("search") == "g1:search"
        assert router.invoke("g2_search") == "g2:search"


def test_a_users_clashing_tools_and_long_ids_all_route() -> None:
    # repros 3, 4, 5: look-alike tool names, ids with `_tool_`, 64-character ids
    long_id = "f" * 64
    gateway = McpGateway()
    gateway.add_user_server("dup", "s", demo_stdio("dup-s", "a.b", "a_b"))
    gateway.add_user_server("a_tool_b", "s", demo_stdio("atb", "c"))
    gateway.add_user_server("a", "s", demo_stdio("a", "b_tool_c"))
    gateway.add_user_server(long_id, "s", demo_stdio("long"))
    with ToolRouter(gateway=gateway, builtins={}) as router:
        dup = names(router.get_user_mcp_tools(["s"], "dup"))
        assert len(dup) == len(set(dup))
        answers = {router.invoke(n) for n in dup if "a_b" in n}
        assert answers == {"dup-s:a.b", "dup-s:a_b"}
        assert router.invoke("echo", {"text": "x"}, "dup") == "dup-s:x"
        first = names(router.get_user_mcp_tools(["s"], "a_tool_b"))
        second = names(router.get_user_mcp_tools(["s"], "a"))
        assert not set(first) & set(second)
        (c,) = [n for n in first if n.endswith("_c") or "tool_c-" in n]
        assert router.invoke(c) == "atb:c"
        assert router.invoke("user_a_tool_b_tool_c") == "a:b_tool_c"
        long_names = names(router.get_user_mcp_tools(["s"], long_id))
        assert all(len(n) <= 64 for n in long_names)
        for n in long_names:
            if "echo" in n:
                assert router.invoke(n, {"text": "y"}) == "long:y"
        assert router.invoke("echo", {"text": "z"}, long_id) == "long:z"
