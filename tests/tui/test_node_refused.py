"""An agent that answers 401/403 is "refused", not "unreachable": on its row, the node screen, the
count in the title, the order of the rows, the alarms' "as of" note and the node_unreachable alarm."""

from __future__ import annotations

from rigmon.alarms.cluster import ClusterAlarms
from rigmon.alarms.cluster import NodeView as RuleView
from rigmon.cluster.agent_answers import TOKEN_WHERE
from rigmon.cluster.alarm_board import board_view
from rigmon.cluster.node_view import STATE_RANK, node_state, trouble_order
from rigmon.cluster.store import ClusterStore
from rigmon.schema import AlarmList
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.node import NodeScreen, out_of_touch
from rigmon.tui.widgets.node_row import NodeRow
from rigmon.tui.widgets.node_status import NodeStatus
from tests.alarms.helpers import T0
from tests.tui.snapshot_apps.dashboard import wait_for
from tests.tui.snapshot_apps.fake_agent import FakeAgent, FakeClock, make_alarm
from tests.tui.test_app import SIZE, dashboard

UNAUTHORIZED = "401 unauthorized: missing or wrong bearer token"
#: What a 401 to the dashboard that sent no token adds: where to give one.
NO_TOKEN = f"; no token was sent: give this agent's read token {TOKEN_WHERE}"


def test_a_refusal_is_its_own_state_and_the_others_stay() -> None:
    assert node_state("unreachable", UNAUTHORIZED) == "refused"
    assert node_state("unreachable", "403 forbidden: not allowed") == "refused"
    assert node_state("unreachable", "cannot connect: connection refused") == "unreachable"
    assert node_state("unreachable", "HTTP 500: agent failed") == "unreachable"
    assert node_state("live", UNAUTHORIZED) == "live"
    # With the trouble: after the nodes that do not answer at all, before the stale ones.
    assert STATE_RANK["unreachable"] < STATE_RANK["refused"] < STATE_RANK["stale"]


def test_the_store_view_and_the_alarm_board_say_refused() -> None:
    clock = FakeClock()
    cluster = ClusterStore(clock)
    refused = cluster.add("http://a:1", "http://a:1")
    gone = cluster.add("http://b:1", "http://b:1")
    refused.set_alarms(AlarmList(node="a", active=(make_alarm("a", 1, "rail_low", "warning", "rail", "rail 11.6 V"),),
                                 recent=()))
    refused.failed(UNAUTHORIZED)
    gone.failed("cannot connect: connection refused")
    views = cluster.views()
    assert [(v.key, v.state) for v in views] == [("http://b:1", "unreachable"), ("http://a:1", "refused")]
    assert trouble_order(views[1])[0] == STATE_RANK["refused"]
    clock.advance(20)
    cluster.evaluate_alarms()
    messages = sorted(a.message for a in cluster.rules.active())
    assert messages == [f"node a:1 refuses this dashboard: {UNAUTHORIZED}",
                        "node b:1 unreachable: cannot connect: connection refused"]
    # The node's own alarms are "as last heard" because it refuses, not because it is unreachable.
    (row,) = [r for r in board_view(cluster).active if r.alarm.rule == "rail_low"]
    assert row.as_of_why == "node refused"


#: What an HTTPS agent answers a dashboard given an ``http://`` URL (`status_error` of its 400).
PLAIN_HTTP = "HTTP 400: this agent serves HTTPS, and this request came in plain HTTP: use an https:// URL"


def test_an_agent_that_answers_400_or_404_refuses_and_is_not_unreachable() -> None:
    # It answered: the URL is wrong, not the network; a 5xx (it failed) stays with the unreachable ones.
    assert node_state("unreachable", PLAIN_HTTP) == "refused"
    assert node_state("unreachable", "HTTP 404: not found") == "refused"
    assert node_state("unreachable", "HTTP 503: busy") == "unreachable"
    assert node_state("unreachable", "bad answer: HTTP 400 in the body") == "unreachable"
    rules = ClusterAlarms(unreachable_hold_s=0)
    rules.evaluate([RuleView("gpu01", connected=False, error=PLAIN_HTTP, key="http://g:1")], {}, T0)
    (alarm,) = rules.active()
    assert alarm.message == f"node gpu01 refuses this dashboard: {PLAIN_HTTP}"


def test_the_cluster_rule_says_the_node_refuses() -> None:
    rules = ClusterAlarms(unreachable_hold_s=0)
    rules.evaluate([RuleView("gpu01", connected=False, error=UNAUTHORIZED, key="http://g:1")], {}, T0)
    (alarm,) = rules.active()
    assert alarm.rule == "node_unreachable"
    assert alarm.message == f"node gpu01 refuses this dashboard: {UNAUTHORIZED}"


async def test_a_node_refusing_the_token_reads_refused_on_its_row_the_title_and_its_screen() -> None:
    good = FakeAgent("aaa", frames=3)
    bad = FakeAgent("zzz", frames=3)
    bad.status = 401
    app, _ = dashboard(good, bad)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.cluster.nodes[bad.url].error is not None
                       and app.cluster.nodes[good.url].latest is not None)
        app.refresh_screen()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ClusterScreen)
        assert screen.sub_title == "2 nodes: 1 live, 1 refused"
        row = next(r for r in screen.query(NodeRow) if r.view is not None and r.view.key == bad.url)
        state = row._figures(row.view, 60)[1]  # type: ignore[arg-type]
        assert state.plain == f"refused, no data yet: {UNAUTHORIZED}{NO_TOKEN}"
        assert "unreachable" not in state.plain
        app.selected = bad.url
        await app.switch_mode("node")
        app.refresh_screen()
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        status = app.screen.query_one(NodeStatus)
        assert status.view is not None and status.view.state == "refused"
        ((level, text),) = [(p.level, p.text) for p in out_of_touch(status.view)]
        assert (level, text) == ("bad", f"refused, no data yet: {UNAUTHORIZED}{NO_TOKEN}")
