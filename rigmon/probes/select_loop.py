"""A thread around one ``select()`` that a socketpair wakes to stop: the probe sender's and the simulated wire's."""

from __future__ import annotations

import selectors
import socket
import threading
from collections.abc import Callable


class SelectThread:
    """A selector, the thread that waits on it, and the wake socketpair that stops it.

    The wake socket is registered with data ``None``: a ready key whose data is ``None``
    means the owner is closing, and the thread's loop returns.

    Args:
        selector: the selector the thread waits on (the owner registers its sockets with it).
    """

    def __init__(self, selector: selectors.BaseSelector) -> None:
        self.selector = selector
        self.stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Wakes the thread from select() at stop.
        self._wake_r, self._wake_w = socket.socketpair()

    def start(self, target: Callable[[], None], name: str) -> None:
        """Register the wake socket and run ``target`` (the owner's loop) in a daemon thread."""
        self._wake_r.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        """Whether the thread was started and still runs."""
        return self._thread is not None and self._thread.is_alive()

    def join(self) -> None:
        """Tell the thread to stop, wake it, and wait for it (2 s at most)."""
        self.stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def close(self) -> None:
        """Close the selector and the wake socketpair (after `join`)."""
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
