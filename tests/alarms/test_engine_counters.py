"""Rule engine, counter rules on an injected clock: the increase over a window, its message, NVLink counters sharing a
subject, resets and clear hold."""

from __future__ import annotations

from typing import Any

import pytest

from tests.alarms.helpers import Step, default, rules, run


COUNTER = """
[[rule]]
name = "replays"
kind = "counter"
select = "gpus[*].pcie_replay_total"
max_increase = 10
window_s = 60.0
subject = "gpu:{index}"
message = "+{increase:.0f}"
"""


def replays(*values: int, every_s: float = 10.0) -> list[Step]:
    return [Step(i * every_s, {"gpus": [{"index": 0, "pcie_replay_total": v}]}) for i, v in enumerate(values)]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # 100 replays accumulated before the agent started are not an increase.
        ((100, 100, 100), []),
        ((0, 4, 8, 11), [(30, "firing", "gpu:0")]),
        # 11 in the window, then the window slides past the rise.
        ((0, 11, 11, 11, 11, 11, 11, 11, 11), [(10, "firing", "gpu:0"), (70, "resolved", "gpu:0")]),
        # Slow creep: 5 per minute never exceeds 10 per minute.
        ((0, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 10, 10), []),
        # A reset (driver reload) is not a negative or huge increase.
        ((50, 55, 0, 3), []),
    ],
)
def test_counter_increase(values: tuple[int, ...], expected: list[tuple[float, str, str]]) -> None:
    assert run(rules(COUNTER), replays(*values))[1] == expected


def test_a_counter_message_gives_the_time_its_increase_was_counted_over() -> None:
    """Half a minute after the agent started, "rose by 11 in 600 s" would claim ten minutes of
    watching: the default rules' messages give the time covered, the window once it is full."""
    def crc(value: int) -> dict[str, Any]:
        return {"gpus": [{"index": 2, "nvlinks": [{"link": 1, "crc_flit_total": value}]}]}

    engine, seen = run(default("gpu_nvlink_crc_rising"), [Step(0, crc(0)), Step(29, crc(0)), Step(30, crc(11))])
    assert seen == [(30, "firing", "gpu:2")]
    (alarm,) = engine.alarm_list().active
    assert alarm.message == "GPU 2 NVLink 1 CRC errors rose by 11 in 30 s"

    engine, seen = run(default("gpu_nvlink_crc_rising"), [Step(0, crc(0)), Step(700, crc(0)), Step(701, crc(11))])
    (alarm,) = engine.alarm_list().active
    assert alarm.message == "GPU 2 NVLink 1 CRC errors rose by 11 in 600 s"


NVLINK_CRC = """
[[rule]]
name = "crc"
kind = "counter"
select = "gpus[*].nvlinks[*].crc_flit_total"
max_increase = 10
window_s = 60.0
subject = "gpu:{index}"
message = "link {link} +{increase:.0f}"
"""


def nvlinks(*totals: tuple[int, ...], every_s: float = 1.0) -> list[Step]:
    """GPU 0 with one NVLink per value of each step (link 2 of a loose GPU rising, the others quiet)."""
    return [Step(i * every_s, {"gpus": [{"index": 0, "nvlinks": [{"link": n, "crc_flit_total": v}
                                                                  for n, v in enumerate(links)]}]})
            for i, links in enumerate(totals)]


def test_links_sharing_a_subject_do_not_flap() -> None:
    """The links of one GPU share the subject ``gpu:0``: a quiet link does not resolve what a
    rising one fired (it did, on every frame, on the loose-sxm2 scenario)."""
    steps = nvlinks(*((0, 0, 8 * i, 0) for i in range(10)))
    engine, seen = run(rules(NVLINK_CRC), steps)
    assert seen == [(2, "firing", "gpu:0")]
    (alarm,) = engine.active()
    # NVLinks are told apart by their ``link`` number, so a message can name the rising one.
    assert alarm.message == "link 2 +72" and alarm.labels["link"] == "2"


def test_the_worst_link_decides_the_message_and_every_link_must_be_quiet_to_clear() -> None:
    steps = nvlinks((0, 0, 0), *((20, 0, 30) for _ in range(9)), every_s=10.0)
    engine, seen = run(rules(NVLINK_CRC), steps)
    # Fires at 10 s (link 2 +30 decides the message); clear once the rises leave the 60 s window.
    assert seen == [(10, "firing", "gpu:0"), (70, "resolved", "gpu:0")]
    assert engine.recent()[0].message == "link 2 +30"


def test_a_counter_reset_under_a_firing_alarm_does_not_resolve_it_at_once() -> None:
    """After a reset (driver reload) less than a window of history cannot say the link is quiet."""
    steps = replays(0, 20, 0, 0, 0, 0, 0, 0, 0, 0, every_s=10.0)
    assert run(rules(COUNTER), steps)[1] == [(10, "firing", "gpu:0"), (80, "resolved", "gpu:0")]


def test_clear_hold_keeps_a_bursty_counter_firing() -> None:
    """A counter that rises in bursts drifts below and above its limit as bursts leave the
    window; ``clear_hold_s`` keeps the alarm firing through the short clear spells."""
    values = (0, 6, 12, 12, 12, 12, 12, 12, 18, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24, 24)
    without = run(rules(COUNTER), replays(*values))[1]
    assert [c for _, c, _ in without] == ["firing", "resolved", "firing", "resolved"]
    held = run(rules(COUNTER + "clear_hold_s = 30.0\n"), replays(*values))[1]
    assert held == [(20, "firing", "gpu:0"), (170, "resolved", "gpu:0")]
