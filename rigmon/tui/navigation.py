"""Navigation: how the dashboard moves between its screens (modes, a node's screen, help, back)."""

from __future__ import annotations

import sys
from abc import abstractmethod
from typing import TYPE_CHECKING

from textual.app import App

from rigmon.tui.screens.alarms import AlarmsScreen
from rigmon.tui.screens.cluster import ClusterScreen
from rigmon.tui.screens.help import HelpScreen
from rigmon.tui.screens.links import LinkScreen
from rigmon.tui.screens.node import NodeScreen

if TYPE_CHECKING:
    from rigmon.cluster.store import ClusterStore
    from rigmon.tui.following import Followers


class Navigation(App[None]):
    """Opening a node, switching modes, the screens' way back, help: a base of `rigmon.tui.app.RigmonApp`.

    Leaving a screen closes the history views on top of it, and the followers are told which
    node's frames are shown whole. The links key is offered once a node reports peer paths
    (`_paths_found`). The app sets the attributes below and draws in `refresh_screen`.
    """

    cluster: ClusterStore
    """The node stores (a node is opened only when it is one of them)."""
    followers: Followers
    """The agents' followers: told which node's screen is shown."""
    selected: str | None
    """The node the node screen shows."""
    paths_seen: bool
    """Whether any node has reported peer paths: the link matrix's key is offered from then on."""

    @abstractmethod
    def refresh_screen(self) -> None:
        """Draw the current screen (the app's own): after every change of screen."""
        raise NotImplementedError

    def _paths_found(self) -> None:
        """A node reported peer paths: offer the links key from now on."""
        self.paths_seen = True
        self.refresh_bindings()

    def open_node(self, key: str) -> None:
        """Show the node screen of ``key``."""
        if not self.screen_stack:
            return  # quitting: a screen's last message (Enter typed with q) comes after the screens closed
        self.selected = key
        self.followers.show_whole(key)
        self._close_history()
        self.switch_mode("node")
        self._close_history()
        if isinstance(self.screen, NodeScreen):
            self.screen.start_at_top()
        self.call_after_refresh(self.refresh_screen)

    def action_show_mode(self, mode: str) -> None:
        """Switch to the cluster, alarms or links screen."""
        if not self.screen_stack:
            return  # quitting (see `open_node`)
        self.followers.show_whole(None)
        self._close_history()
        self.switch_mode(mode)
        self._close_history()
        self.call_after_refresh(self.refresh_screen)

    def _close_history(self) -> None:
        """Close history views on top of the current mode's screen: leaving one for another
        screen ends it (else opening a node later would land on a history of the last one)."""
        # The history view's module (and plotext with it) is imported when a view is first opened
        # (`operations.history_screen`): before that, no screen can be one.
        history = sys.modules.get("rigmon.tui.screens.history")
        while history is not None and isinstance(self.screen, history.HistoryScreen):
            self.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "show_mode" and parameters == ("links",):
            # A rig whose agents probe no peer has no matrix: its footer does not offer one.
            return self.paths_seen or isinstance(self.screen, LinkScreen)
        return super().check_action(action, parameters)

    def action_help(self) -> None:
        """Show keys and states."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def on_cluster_screen_open_node(self, message: ClusterScreen.OpenNode) -> None:
        self.open_node(message.key)

    def on_node_screen_back(self, message: NodeScreen.Back) -> None:
        self.action_show_mode("cluster")

    def on_link_screen_back(self, message: LinkScreen.Back) -> None:
        self.action_show_mode("cluster")

    def on_link_screen_open_node(self, message: LinkScreen.OpenNode) -> None:
        if message.key in self.cluster.nodes:
            self.open_node(message.key)

    def on_alarms_screen_back(self, message: AlarmsScreen.Back) -> None:
        self.action_show_mode("cluster")

    def on_alarms_screen_open_node(self, message: AlarmsScreen.OpenNode) -> None:
        if message.key in self.cluster.nodes:
            self.open_node(message.key)
