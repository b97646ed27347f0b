"""NvidiaBus: the NVIDIA GPUs on the PCI bus, listed every call, their facts read once."""

from __future__ import annotations

import shutil
from pathlib import Path

from rigmon.collectors.device_facts import DeviceFacts
from rigmon.collectors.nvidia_bus import NvidiaBus
from rigmon.sim.tree import write_tree
from tests.collectors.root_helpers import ReadLog


def _pci(bdf: str, vendor: str, cls: str) -> dict[str, str]:
    base = f"/sys/bus/pci/devices/{bdf}"
    return {f"{base}/vendor": f"{vendor}\n", f"{base}/class": f"{cls}\n"}


def test_a_gpu_plugged_or_gone_is_seen_at_the_next_call_and_no_fact_is_read_meanwhile(tmp_path: Path) -> None:
    write_tree(tmp_path, {**_pci("0000:1A:00.0", "0x10de", "0x030200"), **_pci("0000:00:03.0", "0x8086", "0x060400")})
    root = ReadLog(tmp_path)
    bus = NvidiaBus(root)
    assert bus.bus_ids() == ["0000:1a:00.0"]
    read_at_first = len(root.read)
    for _ in range(5):
        ids = bus.bus_ids()
        ids.append("mutated by a caller")
    assert bus.bus_ids() == ["0000:1a:00.0"]
    assert len(root.read) == read_at_first  # the same listing: nothing read per device
    assert len(root.listed) == 7  # but the bus is listed on every call
    write_tree(tmp_path, _pci("0000:3b:00.0", "0x10de", "0x030000"))  # hot-plugged
    assert bus.bus_ids() == ["0000:1a:00.0", "0000:3b:00.0"]
    shutil.rmtree(tmp_path / "sys/bus/pci/devices/0000:1A:00.0")  # fell off the bus
    assert bus.bus_ids() == ["0000:3b:00.0"]


def test_device_facts_begin_says_whether_the_facts_were_kept() -> None:
    facts: DeviceFacts[str, int] = DeviceFacts(refresh_every=3)
    assert facts.begin(["a", "b"]) is False  # first read
    assert facts.get("a", lambda _: 1) == 1
    assert facts.begin(["a", "b"]) is True
    assert facts.begin(("b", "a")) is True  # the same set in another order
    assert facts.begin(["a", "b"]) is False  # due (every 3 reads)
    assert not facts.known("a")
    facts.get("a", lambda _: 2)
    assert facts.begin(["a"]) is False  # b is gone
    assert facts.begin(["a"]) is True
    facts.invalidate()
    assert facts.begin(["a"]) is False
