"""A sysfs integer longer than 64 bits (a driver's garbled read) is not a number: that value is
missing, the collector still reports the rest. Before, a temperature or a lane count of 400 digits
did not become a float (OverflowError) and failed the whole collector; an NVMe ``address`` of 400
digits, used as a directory name, failed it with ENAMETOOLONG."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rigmon.collectors.amd_gpu import parse_dpm_current
from rigmon.collectors.hwmon_power import parse_hwmon_int
from rigmon.collectors.infiniband import parse_counter, parse_state
from rigmon.collectors.nvme import parse_link_width
from rigmon.collectors.process_files import (
    parse_boot_time,
    parse_drm_fdinfo,
    parse_passwd,
    parse_proc_stat,
    parse_status_uid,
)
from rigmon.collectors.sysfs_values import parse_int, parse_millidegrees
from rigmon.collectors.thunderbolt import parse_lanes
from rigmon.schema import encode
from tests.collectors.test_fixture_hosts import HOSTS, run_collector

HUGE = "9" * 400


@pytest.mark.parametrize("text", [HUGE, "-" + HUGE, str(2**64), str(-(2**63) - 1)],
                         ids=["400-digits", "minus-400-digits", "2**64", "-(2**63)-1"])
def test_an_integer_past_64_bits_is_no_number(text: str) -> None:
    assert parse_int(text) is None
    assert parse_millidegrees(text) is None
    assert parse_hwmon_int(text) is None
    assert parse_counter(text) is None
    assert parse_lanes(text) is None
    assert parse_link_width(text) is None


def test_process_and_driver_files_with_a_huge_number_read_as_without_it() -> None:
    """/proc/PID files, a DRM client's fdinfo, /proc/stat's btime, an IB port state, an amdgpu DPM
    table: 5000 digits had raised int()'s ValueError out of the parser (the collector failed)."""
    long = "9" * 5000
    assert parse_status_uid(f"Uid:\t{long}\t0\t0\t0\n") is None
    assert parse_passwd(f"root:x:{long}:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n") == {1000: "alice"}
    assert parse_boot_time(f"btime {long}\n") is None
    stat = parse_proc_stat("4410 (python) S " + " ".join(["1"] * 18 + [long] + ["0"] * 30))
    assert stat is not None and stat.start_ticks is None
    client = parse_drm_fdinfo(f"drm-driver:\tamdgpu\ndrm-engine-gfx:\t{long} ns\ndrm-engine-compute:\t5 ns\n"
                              f"drm-memory-vram:\t{long} KiB\n")
    assert client is not None and client.engine_ns == {"compute": 5} and client.vram_bytes is None
    assert parse_state(f"{long}: ACTIVE") == (None, None)
    assert parse_dpm_current(f"0: 800Mhz\n1: {long}Mhz *\n") is None


def test_the_64_bit_range_is_kept() -> None:
    assert parse_int(str(2**64 - 1)) == 2**64 - 1
    assert parse_int(str(-(2**63))) == -(2**63)
    assert parse_counter(str(2**64 - 1)) == 2**64 - 1


@pytest.mark.parametrize(("folder", "rel", "collector"), [
    ("host-two-nics-thermal", "sys/class/hwmon/hwmon2/temp3_input", "host"),
    ("md-inactive-assembling", "sys/bus/pci/devices/0000:02:00.0/hwmon/hwmon4/temp1_max", "nvme"),
    ("raid0-broken-enclosure-unplugged", "sys/bus/thunderbolt/devices/1-1/rx_lanes", "thunderbolt"),
    ("nvme-no-device-link-found-by-address", "sys/class/nvme/nvme0/address", "nvme"),
    ("raid0-broken-enclosure-unplugged", "sys/bus/thunderbolt/devices/0-0/generation", "thunderbolt"),
])
@pytest.mark.parametrize("digits", [400, 5000])
def test_a_huge_value_costs_that_value_only(tmp_path: Path, folder: str, rel: str, collector: str,
                                            digits: int) -> None:
    root = tmp_path / folder
    shutil.copytree(HOSTS / folder, root, symlinks=True)
    before = run_collector(collector, root)
    (root / rel).write_text("9" * digits + "\n")
    after = run_collector(collector, root)
    assert after["state"] == "ok", after
    assert isinstance(before["records"], list) and isinstance(after["records"], list)
    # What the collector reports can be sent (a frame cannot carry an integer past 64 bits).
    assert encode(after["records"])
    # The same devices are reported (a temperature without its value is left out, as when absent).
    def devices(records: list[dict[str, object]]) -> list[object]:
        return [r.get("name", r.get("sensor")) for r in records if r["type"] != "EventDraft"]

    assert devices(after["records"]) == [d for d in devices(before["records"]) if d != "k10temp-pci-00c3/Tccd1"]
