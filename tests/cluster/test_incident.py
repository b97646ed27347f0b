"""The incident story of a node: the cluster row's reason and the node screen's timeline,
from recorded frames of the simulated incidents read by the real collectors."""

from __future__ import annotations

from msgspec.structs import replace

from rigmon.cluster.incident import (
    Problem,
    RailMemory,
    Sag,
    after_sag,
    joined,
    problems,
    reason,
    sag_before,
    timeline,
)
from rigmon.cluster.node_store import NodeStore
from rigmon.schema import Event
from rigmon.tui.event_merge import merge_xid_events
from tests.alarms.helpers import FakeClock
from tests.tui.snapshot_apps.record_frames import load_frames


def store_of(fixture: str, count: int | None = None) -> NodeStore:
    store = NodeStore("k", "http://n:1", FakeClock())
    frames = load_frames(fixture)
    store.add_frames(frames if count is None else frames[:count])
    return store


def test_a_lost_gpu_names_the_sag_before_it() -> None:
    store = store_of("v100-gpu-lost-rail-sag")
    view = store.view()
    # The rail sagged to 11.255 V 6 s before the loss, came back above 11.7 V, and sagged to
    # 11.357 V: that second sag, just before the loss, is the one named.
    assert reason(view.problems) == "GPU 3 lost 2.0 s after rail 11.357 V"
    assert view.problems[0].level == "bad"


def test_the_timeline_puts_the_sag_before_the_loss_and_lists_each_step_once() -> None:
    store = store_of("v100-gpu-lost-rail-sag")
    steps = timeline(merge_xid_events(tuple(store.events)), store.rail.causes())
    texts = [s.text for s in steps]
    sag = next(i for i, t in enumerate(texts) if "11.26 V is below 11.5 V" in t)
    lost = next(i for i, t in enumerate(texts) if t.startswith("GPU 3 lost 2.0 s after rail 11.357 V"))
    assert sag < lost
    # The rail warning and critical that fired together are one step; the Xid 79, the GPU
    # lost and their alarms are one step.
    assert sum("below 11.7 V" in t for t in texts[:sag + 1]) == 0
    assert not any(t.startswith("Xid 79") for t in texts)
    assert sum(t.startswith("GPU 3 lost") for t in texts) == 1
    assert "gpu_lost" in steps[lost].alarm


def test_a_slow_usb4_link_and_the_array_it_slows() -> None:
    store = store_of("enclosure-link-10g-array-lagging")
    view = store.view()
    assert reason(view.problems) == "USB4 0-1 at 20 of 40 Gb/s: re-plug; md127 at 67 % of md126"
    assert store.latest is not None
    steps = timeline(merge_xid_events(tuple(store.events)), store.rail.causes(), now=view.problems,
                     now_at=store.latest.taken_at)
    assert steps[-1].text == "md127 at 67 % of md126 now, after link 0-1 slowed"
    assert steps[-2].text == ("Thunderbolt 0-1 (OWC Express 1M2) link 20 Gb/s x2 -> 10 Gb/s x2; "
                              "degraded: 20 Gb/s below expected 40 Gb/s")
    assert steps[-2].subject == "link:0-1"


def test_a_degraded_array_is_bad() -> None:
    view = store_of("raid1-member-failed-recovering").view()
    assert view.problems[0].level == "bad" and view.problems[0].text == "md127 recovering"


def test_a_problem_ending_a_sentence_joins_the_next_without_its_full_stop() -> None:
    # Before: "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus.; collector gpu failing" on the
    # row and the node screen's "now" line (the kernel's message ends with a full stop).
    xid = Problem("bad", "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus.", "gpu:3")
    failing = Problem("warn", "collector gpu failing", "collector:gpu")
    assert reason([xid, failing]) == "Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus; collector gpu failing"
    assert joined([failing, xid]) == "collector gpu failing; Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus."
    assert reason([xid, failing, failing], 1) == f"{xid.text} (+2 more)"


def test_a_healthy_node_has_no_reason() -> None:
    assert store_of("two-raid0-model-load").view().problems == ()


def test_a_loosely_seated_gpu() -> None:
    store = store_of("v100-gpu-lost-rail-sag", 5)
    assert store.latest is not None
    gpus = list(store.latest.readings.gpus)
    links = tuple(replace(link, crc_flit_per_s=5.0) for link in gpus[2].nvlinks)
    gpus[2] = replace(gpus[2], pcie_width=8, pcie_width_max=16, nvlinks=links)
    frame = replace(store.latest, readings=replace(store.latest.readings, gpus=tuple(gpus)))
    found = problems(frame, None)
    assert reason(found) == f"GPU 2 NVLink CRC +{5 * len(links)}/s, PCIe x8 of x16: check seating"


def test_a_sag_without_a_loss_is_named_to_the_millivolt() -> None:
    from rigmon.summary import NodeSummary

    store = store_of("v100-gpu-lost-rail-sag", 5)
    assert store.latest is not None
    summary = NodeSummary(node="n", seq=1, taken_at=1.0, rail_min_volts=11.9, rail_worst_volts=11.255)
    found = problems(store.latest, summary)
    # Before: "rail 11.255 V", the node screen's "now" line naming a sag of the last minute as the rail now.
    assert reason(found) == "rail 11.255 V within 60 s, now 11.900 V"
    assert found[0].level == "bad"
    # While the rail is that low, that is all it says.
    assert reason(problems(store.latest, replace(summary, rail_min_volts=11.255))) == "rail 11.255 V"


def test_sag_before_looks_back_only_below_the_warning_limit() -> None:
    points = [(0.0, 11.9), (5.0, 11.26), (9.0, 11.72), (10.0, 11.8)]
    assert sag_before(points, 10.2) == Sag(5.0, 11.26)
    assert sag_before(points, 100.0) is None
    assert sag_before([(0.0, 11.9)], 1.0) is None
    assert after_sag(Sag(5.0, 11.255), 5.8) == "0.8 s after rail 11.255 V"


def test_the_sag_named_is_the_one_just_before_the_loss_not_a_deeper_one_long_before() -> None:
    """A guarded undervolt-bus-drop run blamed GPU 3's loss on a sag 22 s earlier: the deepest of
    30 s, though the rail recovered after it and sagged again 0.8 s before the loss."""
    points = [(0.0, 11.98), (1.0, 11.255), (2.0, 11.97), (12.0, 11.38), (13.0, 11.97), (22.2, 11.39),
              (23.0, 11.6), (24.0, 11.95)]
    assert sag_before(points, 23.0) == Sag(22.2, 11.39)
    assert after_sag(Sag(22.2, 11.39), 23.0) == "0.8 s after rail 11.390 V"
    # None that close: the latest sag (its lowest minimum), and the text says how long before.
    assert sag_before(points, 18.0) == Sag(12.0, 11.38)
    assert after_sag(Sag(12.0, 11.38), 18.0) == "6 s after rail 11.380 V"
    # One sag over several frames: its lowest minimum.
    assert sag_before([(0.0, 11.9), (5.0, 11.5), (6.0, 11.26), (7.0, 11.6), (8.0, 11.9)], 12.0) == Sag(6.0, 11.26)


def test_rail_memory_keeps_the_cause_of_each_loss() -> None:
    memory = RailMemory()
    memory.add(100.0, 11.3, [])
    memory.add(101.0, 11.8, [])
    lost = Event(id="e1", at=101.5, kind="gpu_lost", severity="critical", subject="gpu:3", message="GPU 3 lost")
    memory.add(102.0, 11.9, [lost])
    assert memory.cause_of("gpu:3") == Sag(100.0, 11.3, before=101.5)
    assert memory.cause_of("gpu:1") is None
    memory.add(103.0, 11.9, [lost])  # the same loss again: the same cause
    assert memory.cause_of("gpu:3") == Sag(100.0, 11.3, before=101.5)


def test_a_second_loss_of_a_gpu_is_explained_by_its_own_sag_or_none() -> None:
    # After a restart GPU 3 is lost again: the first loss's sag, 68 s earlier, is not its cause.
    memory = RailMemory()
    memory.add(100.0, 11.3, [])
    memory.add(101.0, 11.9, [Event(id="e1", at=100.5, kind="gpu_lost", severity="critical", subject="gpu:3",
                                   message="GPU 3 lost")])
    memory.add(160.0, 11.35, [])
    memory.add(168.0, 11.9, [Event(id="e9", at=167.5, kind="gpu_lost", severity="critical", subject="gpu:3",
                                   message="GPU 3 lost")])
    assert memory.cause_of("gpu:3") == Sag(160.0, 11.35, before=167.5)
    memory.add(400.0, 12.0, [Event(id="e20", at=399.5, kind="gpu_lost", severity="critical", subject="gpu:3",
                                   message="GPU 3 lost")])
    assert memory.cause_of("gpu:3") is None  # no sag before this one


def test_marks_are_plain_steps_and_repeats_fold() -> None:
    def ev(n: int, kind: str, severity: str, message: str, subject: str = "gpu:2") -> Event:
        return Event(id=f"e{n}", at=float(n * 10), kind=kind, severity=severity, subject=subject,  # type: ignore[arg-type]
                     message=message)
    events = [ev(1, "mark", "info", "epoch 3", "job:train"), ev(2, "pcie_aer", "warning", "PCIe corrected error"),
              ev(3, "link_down", "warning", "link down", "link:eth0"),
              ev(4, "pcie_aer", "warning", "PCIe corrected error"), ev(5, "agent_started", "info", "agent started"),
              ev(6, "pcie_aer", "warning", "PCIe corrected error")]
    steps = timeline(events)
    assert [(s.level, s.text) for s in steps] == [
        ("info", "epoch 3"), ("warn", "link down"), ("warn", "PCIe corrected error (×3 since 00:00:20)")]
    assert steps[-1].at == 60.0


def test_alarms_of_one_subject_firing_together_are_one_step() -> None:
    def firing(n: int, rule: str, severity: str, text: str) -> Event:
        return Event(id=f"e{n}", at=100.0 + n, kind="alarm_firing", severity=severity, subject="gpu:2",  # type: ignore[arg-type]
                     message=f"{rule} firing: {text}", data={"rule": rule, "severity": severity})
    steps = timeline([firing(1, "crc", "warning", "GPU 2 NVLink 2 CRC errors rose by 17"),
                      firing(2, "replay", "warning", "GPU 2 NVLink 2 replays rose by 11")])
    assert [(s.text, s.alarm) for s in steps] == [
        ("GPU 2 NVLink 2 CRC errors rose by 17; replays rose by 11", "crc, replay")]


def test_a_link_that_flapped_within_the_minute_is_named() -> None:
    frames = load_frames("strix-usb4-thunderbolt-net")
    store = NodeStore("k", "http://n:1", FakeClock())
    # Degraded from frame 42 on; then healthy frames again (the start of the recording, re-timed).
    healthy = [replace(f, seq=100 + i, taken_at=frames[-1].taken_at + 1 + i) for i, f in enumerate(frames[:5])]
    store.add_frames(frames + healthy)
    view = store.view()
    assert store.summary is not None and store.summary.links_healthy == store.summary.links_total
    # Before: "USB4 at 20 Gb/s within 60 s (flapping)": neither that it is at 40 now nor what to do.
    assert reason(view.problems) == "USB4 down to 20 Gb/s within 60 s, now 40 (flapping): re-plug"
    # Its Thunderbolt alarm, held for its clear hold, names the link: one problem, not the alarm's long
    # message beside it ("...: re-plug both ends, try another cable or port (now ok)").
    from rigmon.schema import Alarm

    assert store.latest is not None
    held = Alarm(id="a1", rule="thunderbolt_degraded", rule_kind="state", severity="warning", node="n",
                 subject="link:0-1", state="firing", started_at=1.0, updated_at=2.0, fired_at=1.0,
                 message="Thunderbolt/USB4 link 0-1 at 20 Gb/s below expected 40 Gb/s: re-plug both ends, "
                         "try another cable or port", value="degraded", value_now="ok")
    assert reason(problems(store.latest, store.summary, [held]), limit=5) == \
        "USB4 0-1 down to 20 Gb/s within 60 s, now 40 (flapping): re-plug"


def test_a_state_alarm_held_after_its_subject_came_back_says_where_it_is_now() -> None:
    # Before: node01's story read "now: RDMA port mlx5_0/1 is down: check the cable, ..." for the minute
    # its alarm is held after the port came back up (tp-cluster), as if the port were still down.
    from rigmon.schema import Alarm

    store = store_of("v100-gpu-lost-rail-sag", 5)
    assert store.latest is not None
    down = Alarm(id="a1", rule="rdma_port_down", rule_kind="state", severity="warning", node="n", subject="rdma:mlx5_0/1",
                 state="firing", message="RDMA port mlx5_0/1 is down: check the cable", started_at=1.0, updated_at=2.0,
                 fired_at=1.0, value="down", value_now="ok")
    assert reason(problems(store.latest, None, [down])) == "RDMA port mlx5_0/1 is down: check the cable (now ok)"
    assert reason(problems(store.latest, None, [replace(down, value_now="down")])) == \
        "RDMA port mlx5_0/1 is down: check the cable"
    # A number in the unit the message gives the one it fired on.
    slow = replace(down, rule="link_slower", subject="link:thunderbolt0", value=20000, value_now=40000,
                   message="link thunderbolt0 runs at 20000 Mb/s, first seen at 40000 Mb/s")
    assert reason(problems(store.latest, None, [slow])) == \
        "link thunderbolt0 runs at 20000 Mb/s, first seen at 40000 Mb/s (now 40000 Mb/s)"
    # A flag the rule fires on (stalled, temp_over_max, p99_over_limit) that is down again: "ok", not
    # Python's "(now False)" (node01's story during net_link_stalled's clear hold, strix-usb4).
    stalled = replace(down, rule="net_link_stalled", subject="link:thunderbolt0", value=True, value_now=False,
                      message="link thunderbolt0 is up but passes no packet")
    assert reason(problems(store.latest, None, [stalled])) == "link thunderbolt0 is up but passes no packet (now ok)"
    assert reason(problems(store.latest, None, [replace(stalled, value_now=True)])) == \
        "link thunderbolt0 is up but passes no packet"


def test_an_nvme_link_below_its_speed_says_what_to_do() -> None:
    # Before: "nvme1 PCIe Gen3 of Gen4", the only link reason without what to do about it.
    from rigmon.schema import NvmeReading

    store = store_of("v100-gpu-lost-rail-sag", 5)
    assert store.latest is not None
    nvme = NvmeReading(name="nvme1", model="Samsung SSD 990 PRO 2TB", serial=None, firmware=None, state="live",
                       transport="pcie", address="0000:02:00.0", namespaces=("nvme1n1",), link_speed_gts=8.0,
                       link_width=4, max_link_speed_gts=16.0, max_link_width=4, link_gen=3, max_link_gen=4,
                       link_lost=False, temp_c=None, temp_max_c=None, temp_crit_c=None, link_state="degraded")
    frame = replace(store.latest, readings=replace(store.latest.readings, gpus=(), nvme=(nvme,)))
    assert "nvme1 PCIe Gen3 of Gen4: re-seat" in reason(problems(frame, None))


def _lost_and_exit(exit_at: float, severity: str, exit_text: str) -> list[Event]:
    lost = Event(id="r-1", at=100.0, kind="gpu_lost", severity="critical", subject="gpu:3",
                 message="GPU 3 (0000:1d:00.0) lost: NVML: GPU is lost", data={"gpu_index": 3})
    after_s = exit_at - lost.at
    exited = Event(id="r-2", at=exit_at, kind="gpu_process_exited", severity=severity,  # type: ignore[arg-type]
                   subject="gpu:3",
                   message=f"python3 train.py (pid 4245) exited{exit_text} on GPU 3, exit seen {after_s:.1f} s after "
                           "GPU 3 was lost",
                   data={"pid": 4245, "after_event": "r-1", "after_kind": "gpu_lost", "after_s": after_s})
    return [lost, exited]


def test_a_run_that_ended_after_the_loss_is_a_step_even_without_its_exit_code() -> None:
    # torchrun reaps its workers at once: the collector seldom sees a zombie's exit code, and an
    # exit of unknown status is "info". Before, the worker's end after "GPU 3 lost" was not in the
    # timeline at all when its code was not seen.
    steps = timeline(_lost_and_exit(101.0, "info", ""))
    assert [(s.level, s.text) for s in steps] == [
        ("bad", "GPU 3 lost"),
        ("info", "python3 train.py (pid 4245) exited on GPU 3, exit seen 1.0 s after GPU 3 was lost")]


def test_a_run_that_ended_in_the_second_of_the_loss_is_its_own_step_after_it() -> None:
    # The worker's exit (a process on the GPU, not the GPU) is not folded into the loss's line.
    steps = timeline(_lost_and_exit(100.4, "warning", " (exit code 1)"))
    assert [(s.level, s.text) for s in steps] == [
        ("bad", "GPU 3 lost"),
        ("warn", "python3 train.py (pid 4245) exited (exit code 1) on GPU 3, exit seen 0.4 s after GPU 3 was lost")]


def test_an_exit_seen_after_the_xid_stays_when_the_loss_follows_and_alarms_stay_their_own() -> None:
    # The kernel logs Xid 79, the worker dies of it and is seen gone, then NVML reports the GPU lost
    # at the next poll. Before, the exit's step ("... after Xid 79 on GPU 3") was taken for the Xid
    # the loss restates and dropped; and an alarm firing on a GPU within seconds of a process's exit
    # there was taken for that exit's alarm (its own line gone).
    xid = Event(id="r-1", at=99.5, kind="xid", severity="critical", subject="gpu:3",
                message="Xid 79 on GPU 3 (0000:1d:00.0): GPU has fallen off the bus", data={"xid": 79, "gpu_index": 3})
    exited = Event(id="r-2", at=100.0, kind="gpu_process_exited", severity="warning", subject="gpu:3",
                   message="python3 train.py (pid 4245) exited (exit code 1) on GPU 3, exit seen 0.5 s after Xid 79 "
                           "on GPU 3", data={"pid": 4245, "after_event": "r-1"})
    lost = Event(id="r-3", at=101.0, kind="gpu_lost", severity="critical", subject="gpu:3",
                 message="GPU 3 (0000:1d:00.0) lost", data={"gpu_index": 3})
    crash = Event(id="r-4", at=200.0, kind="gpu_process_exited", severity="warning", subject="gpu:0",
                  message="python3 train.py (pid 4242) exited (exit code 1) on GPU 0", data={"pid": 4242})
    hot = Event(id="r-5", at=201.0, kind="alarm_firing", severity="warning", subject="gpu:0",
                message="gpu_hot firing: GPU 0 at 91 °C", data={"rule": "gpu_hot", "severity": "warning"})
    # A rule of the operator's on the exit itself ("job_crashed") is that exit's step, as an alarm
    # on a hardware event is.
    crashed = Event(id="r-6", at=200.5, kind="alarm_firing", severity="warning", subject="gpu:0",
                    message=f"job_crashed firing: job_crashed: {crash.message}",
                    data={"rule": "job_crashed", "severity": "warning"})
    steps = timeline([xid, exited, lost, crash, crashed, hot])
    assert [s.text for s in steps] == [
        exited.message, "GPU 3 lost", crash.message, "GPU 0 at 91 °C"]


def test_a_process_seen_leaving_its_gpu_after_the_loss_is_the_runs_end_as_an_exit_is() -> None:
    """An agent in another PID namespace cannot see the worker's exit: it left GPU 3 after the loss,
    which the timeline shows as it shows an exit of unknown status."""
    lost, _ = _lost_and_exit(101.0, "info", "")
    left = Event(id="r-2", at=101.0, kind="gpu_process_left", severity="info", subject="gpu:3",
                 message="process (pid 4245) left GPU 3 (exit not visible to the agent), seen 1.0 s after GPU 3 "
                         "was lost", data={"pid": 4245, "after_event": "r-1", "after_kind": "gpu_lost"})
    quiet = replace(left, id="r-3", at=300.0, message="process (pid 4246) left GPU 0", data={"pid": 4246})
    steps = timeline([lost, left, quiet])
    assert [(s.level, s.text, s.kind) for s in steps] == [
        ("bad", "GPU 3 lost", "gpu_lost"), ("info", left.message, "gpu_process_left")]


def _job_event(n: int, kind: str, severity: str, message: str, subject: str = "gpu:3") -> Event:
    return Event(id=f"e{n}", at=float(n * 10), kind=kind, severity=severity, subject=subject,  # type: ignore[arg-type]
                 message=message)


def test_marks_never_push_trouble_out_of_the_timeline() -> None:
    # A job marking its checkpoints after a GPU was lost: before, twelve marks took the twelve
    # lines and the loss was gone from the node's incident story.
    events = [_job_event(1, "mark", "info", "epoch 1 checkpoint", "node:n1"),
              _job_event(2, "gpu_lost", "critical", "GPU 3 is lost")]
    events += [_job_event(3 + n, "mark", "info", f"epoch {2 + n} checkpoint", "node:n1") for n in range(12)]
    steps = timeline(events)
    # The mark before the loss says where the job was; the newest says where it is now.
    assert [s.text for s in steps] == ["epoch 1 checkpoint", "GPU 3 is lost", "epoch 13 checkpoint"]


def test_a_node_with_only_marks_has_no_incident() -> None:
    events = [_job_event(n, "mark", "info", f"epoch {n} checkpoint", "node:n1") for n in range(1, 6)]
    assert timeline(events) == ()


def test_a_run_of_marks_between_two_troubles_is_its_last() -> None:
    events = [_job_event(1, "pcie_aer", "warning", "PCIe corrected error"),
              *(_job_event(2 + n, "mark", "info", f"epoch {n + 1} checkpoint", "node:n1") for n in range(4)),
              _job_event(7, "link_down", "warning", "link down", "link:eth0")]
    assert [s.text for s in timeline(events)] == ["PCIe corrected error", "epoch 4 checkpoint", "link down"]


def test_the_limit_keeps_the_newest_trouble_and_marks_only_in_the_room_left() -> None:
    events = []
    for n in range(6):
        events.append(_job_event(2 * n + 1, "mark", "info", f"epoch {n} checkpoint", "node:n1"))
        events.append(_job_event(2 * n + 2, "link_down", "warning", f"link {n} down", f"link:eth{n}"))
    steps = timeline(events, limit=4)
    # Four lines: the four newest troubles; no room for the marks between them.
    assert [s.text for s in steps] == ["link 2 down", "link 3 down", "link 4 down", "link 5 down"]
    steps = timeline(events, limit=8)  # room for two: the newest marks
    assert [s.text for s in steps] == ["link 0 down", "link 1 down", "link 2 down", "link 3 down",
                                       "epoch 4 checkpoint", "link 4 down", "epoch 5 checkpoint", "link 5 down"]


def test_a_resolved_step_says_what_was_wrong_without_the_advice() -> None:
    # Before: "resolved: array md127 reads at 67 % of the fastest array loaded beside it: a member's link below
    # its speed, a drive at its warning temperature or a failing member (the storage box and its alarms say
    # which)": four lines at 80 columns, for an alarm that is over.
    def alarm(n: int, change: str, rule: str, text: str, subject: str = "md:md127") -> Event:
        return Event(id=f"e{n}", at=100.0 * n, kind=f"alarm_{change}", severity="info", subject=subject,
                     message=f"{rule} {change}: {text}", data={"rule": rule, "severity": "warning"})

    lag = ("array md127 reads at 67 % of the fastest array loaded beside it: a member's link below its speed, a "
           "drive at its warning temperature or a failing member (the storage box and its alarms say which)")
    key = "path tbnet: key mismatch: the peer refuses probes"
    lag6 = lag.replace("md127", "md126")
    steps = timeline([alarm(1, "firing", "md_array_lagging", lag), alarm(2, "resolved", "md_array_lagging", lag),
                      alarm(3, "firing", "md_array_lagging", lag6, "md:md126"),
                      alarm(4, "resolved", "md_array_lagging", lag6 + " (no longer reported)", "md:md126"),
                      alarm(5, "firing", "peer_path_key_mismatch", key, "peer:n2/tbnet"),
                      alarm(6, "resolved", "peer_path_key_mismatch", key, "peer:n2/tbnet")])
    # The second firing's advice is the first's: said once, above (`test_incident_hot_drive`).
    assert [s.text for s in steps] == [
        lag, "resolved: array md127 reads at 67 % of the fastest array loaded beside it",
        lag6.split(": ")[0],
        "resolved: array md126 reads at 67 % of the fastest array loaded beside it (no longer reported)",
        key, "resolved: " + key]
    assert timeline([alarm(2, "resolved", "md_array_lagging", lag)])[0].text == "resolved: " + lag


def test_the_guards_release_and_restore_follow_its_engage() -> None:
    # undervolt-bus-drop-guarded, the operator pressing g then G: the timeline said "guard capped GPUs 0,1,2,3"
    # and next "GPU 3 lost", as if the guard had failed; the release that took the caps off was not in it.
    events = [_job_event(1, "guard_engaged", "warning", "guard capped GPUs 0,1,2,3 (step 1, application clocks)",
                         "guard"),
              _job_event(2, "guard_held", "info", "guard held by root: settings stay until released", "guard"),
              _job_event(3, "guard_restored", "info", "guard restored GPUs 0,1,2,3 (released by root)", "guard"),
              _job_event(4, "gpu_lost", "critical", "GPU 3 is lost")]
    assert [(s.level, s.text) for s in timeline(events)] == [
        ("warn", "guard capped GPUs 0,1,2,3 (step 1, application clocks)"),
        ("info", "guard held by root: settings stay until released"),
        ("info", "guard restored GPUs 0,1,2,3 (released by root)"), ("bad", "GPU 3 is lost")]
    # The settings each GPU was left with are the guard line's and the event list's: at 80 columns they took
    # three of the step's five lines ("gpu0 877/1005 MHz 300 W; gpu1 877/1005 MHz 300 W; ...").
    after = "gpu0 877/1005 MHz 300 W; gpu1 877/1005 MHz 300 W"
    capped = replace(events[0], message=f"{events[0].message} because rail minimum 11.255 V below 11.5 V: {after}"
                                        " [dry-run: nothing was changed]", data={"after": after})
    restored = replace(events[2], message=f"{events[2].message}: {after}", data={"after": after})
    assert [s.text for s in timeline([capped, restored])] == [
        ("guard capped GPUs 0,1,2,3 (step 1, application clocks) because rail minimum 11.255 V below 11.5 V "
         "[dry-run: nothing was changed]"), "guard restored GPUs 0,1,2,3 (released by root)"]
    # A guard that never capped anything in the timeline's events is no step of it.
    assert [s.text for s in timeline(events[1:])] == ["GPU 3 is lost"]
