"""ReplayKeys: the dashboard's replay keys (play/pause, seek, speed) over a bundle `rigmon dash --replay` plays."""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, ClassVar

from textual.actions import SkipAction
from textual.app import App
from textual.binding import Binding, BindingType

if TYPE_CHECKING:
    from rigmon.cluster.replay import Replay
    from rigmon.cluster.store import ClusterStore

#: Real seconds between steps of a playing replay.
REPLAY_TICK_S = 0.25
#: The replay's seek keys, one item of the key line.
SEEK_KEYS = Binding.Group("Seek", compact=True)
#: Actions that only mean something while replaying (hidden from the footer otherwise).
REPLAY_ACTIONS = frozenset({"play_pause", "seek", "speed"})


class ReplayKeys(App[None]):
    """The replay keys' bindings and actions: a base of `rigmon.tui.app.RigmonApp`.

    Its bindings come before the app's own, so the footer shows them first; `check_action`
    offers them only while replaying. The app sets `replay` and `cluster`, and draws in
    `refresh_screen`: the one hook the keys need of it, abstract, so a type checker refuses an
    app on these keys that does not say how it draws. (Textual's metaclass is not ``ABCMeta``:
    at run time nothing is refused, and the hook raises if it was not overridden.)
    """

    # Seeking is one item of the key line (``←→ Seek``, ``space Play``): one key each, "← -10s  → +10s  space
    # Play/pause" took the room of the help key at 80 columns. The speed keys are left to the help screen (the
    # time cursor shows the speed): with them the help key was cut again.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "play_pause", "Play", priority=True),
        Binding("left", "seek(-10)", "10 s back", key_display="←", group=SEEK_KEYS, priority=True),
        Binding("right", "seek(10)", "10 s on", key_display="→", group=SEEK_KEYS, priority=True),
        Binding("shift+left", "seek(-60)", "-1m", show=False, priority=True),
        Binding("shift+right", "seek(60)", "+1m", show=False, priority=True),
        Binding("left_square_bracket", "speed(-1)", "Slower", show=False, priority=True),
        Binding("right_square_bracket", "speed(1)", "Faster", show=False, priority=True),
    ]

    replay: Replay | None
    """The bundle played back; ``None`` when following agents."""
    cluster: ClusterStore
    """The node stores the replay files its frames into."""

    @abstractmethod
    def refresh_screen(self) -> None:
        """Draw the current screen (the app's own): after every replay step, play/pause, seek and speed change."""
        raise NotImplementedError

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.replay is not None or action not in REPLAY_ACTIONS

    def _replay_tick(self) -> None:
        if self.replay is not None and self.replay.playing:
            self.replay.tick(self.cluster, REPLAY_TICK_S)
            self.refresh_screen()

    def _replay(self) -> Replay:
        if self.replay is None:
            raise SkipAction()
        return self.replay

    def action_play_pause(self) -> None:
        """Play or pause the replay."""
        self._replay().toggle(self.cluster)
        self.refresh_screen()

    def action_seek(self, seconds: float) -> None:
        """Move the replay cursor by ``seconds``."""
        replay = self._replay()
        replay.seek(self.cluster, replay.at + seconds)
        self.refresh_screen()

    def action_speed(self, step: int) -> None:
        """Replay faster (1) or slower (-1)."""
        self._replay().change_speed(step)
        self.refresh_screen()
