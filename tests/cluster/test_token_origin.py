"""A refused token is to be checked where it was given: the option, or the dashboard's config file and node entry."""

from __future__ import annotations

from pathlib import Path

import httpx

from rigmon.cluster.client import AgentClient, Failed
from rigmon.cluster.config import DashConfig, NodeEntry, NodeTarget, resolve_targets
from rigmon.snapshot.pull import pull_agent
from rigmon.tui.following import default_client


def secret(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def test_each_target_knows_where_its_token_was_given(tmp_path: Path) -> None:
    token_file = secret(tmp_path / "b.token", "t2\n")
    config = DashConfig(nodes=(NodeEntry("a:1", token="t1"), NodeEntry("b:1", token_file=token_file),
                               NodeEntry("c:1")))
    a, b, c = resolve_targets([], config, source="/home/op/.config/rigmon/dash.toml")
    assert a.token_from == "/home/op/.config/rigmon/dash.toml: nodes[0].token (node a:1)"
    assert b.token_from == "/home/op/.config/rigmon/dash.toml: nodes[1].token_file (node b:1)"
    assert c.token_from is None
    # A URL the config does not list takes the command line's token, and says so.
    (d,) = resolve_targets(["d:1"], config, token="t4", token_from="--token-file /home/op/read.token")
    assert d.token_from == "--token-file /home/op/read.token"
    (e,) = resolve_targets(["e:1"], config)
    assert e.token_from is None


async def test_an_export_refused_a_config_token_names_the_config_entry(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": "missing or wrong bearer token"})

    where = f"{tmp_path}/dash.toml: nodes[1].token_file (node http://rig1:9871)"
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler),
                                 headers={"Authorization": "Bearer wrong"}) as client:
        part = await pull_agent(client, "http://rig1:9871", 60.0, token_from=where)
    assert part.error is not None
    assert f"check that {where} holds this agent's read token" in part.error
    assert "--token-file" not in part.error


def refusing(request: httpx.Request) -> httpx.Response:
    return httpx.Response(401, json={"error": "missing or wrong bearer token"})


async def test_a_live_node_refusing_its_token_names_where_it_was_given() -> None:
    where = "/home/op/.config/rigmon/dash.toml: nodes[0].token_file (node http://rig1:9871)"
    target = NodeTarget("http://rig1:9871", "wrong", token_from=where)
    client = AgentClient(target.url, target.token, transport=httpx.MockTransport(refusing), token_from=where)
    try:
        update = await anext(client.follow())
    finally:
        await client.aclose()
    assert isinstance(update, Failed)
    assert update.reason == (f"401 unauthorized: missing or wrong bearer token; check that {where} holds this "
                             "agent's read token")
    # The dashboard's clients are built with it.
    built = default_client(target)
    try:
        assert built.token_from == where
    finally:
        await built.aclose()


async def follow_once(target: NodeTarget, respond: httpx.Response) -> str:
    """The reason the dashboard's client for ``target`` gives when its agent answers ``respond``."""
    client = AgentClient(target.url, target.token, transport=httpx.MockTransport(lambda r: respond),
                         token_from=target.token_from, token_where=target.token_where)
    try:
        update = await anext(client.follow())
    finally:
        await client.aclose()
    assert isinstance(update, Failed)
    return update.reason


async def test_a_node_wanting_a_token_the_dashboard_did_not_send_says_where_to_give_one(tmp_path: Path) -> None:
    source = "/home/op/.config/rigmon/dash.toml"
    token_file = secret(tmp_path / "b.token", "t2\n")
    config = DashConfig(nodes=(NodeEntry("a:1"), NodeEntry("b:1", token_file=token_file)))
    listed, with_token = resolve_targets([], config, source=source)
    (given,) = resolve_targets(["c:1"], config, source=source)
    wants = httpx.Response(401, json={"error": "missing or wrong bearer token"})
    # A node of the config: its entry's key.
    assert await follow_once(listed, wants) == (
        "401 unauthorized: missing or wrong bearer token; no token was sent: give this agent's read token in "
        f"{source}: nodes[0].token_file (node a:1)")
    # A URL of the command line: the option, or an entry for it in the config.
    assert await follow_once(given, wants) == (
        "401 unauthorized: missing or wrong bearer token; no token was sent: give this agent's read token with "
        f"rigmon dash --token-file FILE, or as token_file of a [[nodes]] entry for http://c:1 in {source}")
    # A client not told its node's place names the general one.
    assert "no token was sent: give this agent's read token as token_file in the node's [[nodes]] entry" in (
        await follow_once(NodeTarget("http://d:1"), wants))
    # A token sent and refused is still said to be refused, where it was given.
    assert await follow_once(with_token, wants) == (
        f"401 unauthorized: missing or wrong bearer token; check that {source}: nodes[1].token_file (node b:1) "
        "holds this agent's read token")
    # The dashboard's clients are built knowing where.
    built = default_client(listed)
    try:
        assert built.token_where == listed.token_where
    finally:
        await built.aclose()
