"""The probe sender against a real responder on 127.0.0.1: what a round trip counts."""

from __future__ import annotations

import asyncio
import time

from rigmon.probes.responder import ProbeResponder
from rigmon.probes.sender import PathTarget, ProbeSender
from rigmon.probes.wire import derive_key

KEY = derive_key("cluster-token")


def pair(window_s: float) -> tuple[ProbeResponder, ProbeSender]:
    """node02's responder, bound to 127.0.0.1 but not started, and node01's sender probing it at 20 Hz."""
    responder = ProbeResponder("node02", KEY, frozenset({"node01"}), 1000.0, 1000)
    responder.bind("127.0.0.1", 0)
    assert responder.sock is not None
    port = responder.sock.getsockname()[1]
    sender = ProbeSender("node01", KEY, [PathTarget("node02", "roce", "127.0.0.1", port)], rate_hz=20.0,
                         window_s=window_s)
    return responder, sender


async def test_the_responders_wait_before_it_reads_a_request_is_not_the_round_trip() -> None:
    """The peer's responder thread waits (here: is not started yet) while the first probes sit in its
    socket; their round trips are what the wire took, not that wait (which they once included whole)."""
    responder, sender = pair(window_s=8.0)
    sender.start()
    try:
        while sender.windows()[0].sent_total < 1:
            await asyncio.sleep(0.001)
        held_since = time.monotonic()  # the first probe went before this
        await asyncio.sleep(0.3)
        held_s = time.monotonic() - held_since  # and waits at least this long for the responder
        responder.start()
        for _ in range(500):
            if sender.windows()[0].received_total >= 10:
                break
            await asyncio.sleep(0.01)
        (window,) = sender.windows()
        assert window.received_total >= 10
        assert window.stats.max_us is not None
        # Every probe sent before the responder started (the first one for held_s and more) is in
        # the window; none of them counts its wait for the responder.
        assert window.stats.max_us < held_s * 1e6, (window.stats, held_s)
    finally:
        sender.close()
        responder.close()


async def test_a_reply_that_came_back_is_not_lost_while_the_senders_thread_has_not_read_it() -> None:
    """The sender's thread stalls (here: is stopped) while replies arrive: they sit in its socket. The
    window is read from another thread (the collector's) after the reply timeout: the replies are
    there, stamped by the kernel, and count (they once counted as lost until the thread ran)."""
    responder, sender = pair(window_s=20.0)
    sender.start()
    try:
        while sender.windows()[0].sent_total < 3:
            await asyncio.sleep(0.01)
        sender._loop.join()  # the thread stalls: nothing reads the replies
        sent = sender.windows()[0].sent_total
        responder.start()
        while responder.reading().answered_total < sent:
            await asyncio.sleep(0.01)
        await asyncio.sleep(sender.reply_timeout_s + 0.1)  # every probe is due: answered or lost
        (window,) = sender.windows()
        assert (window.stats.sent, window.stats.received, window.received_total) == (sent, sent, sent)
    finally:
        sender.close()
        responder.close()
