"""Property-based fuzzing of every parser: each returns a value or raises its own documented error.

RM1 and text ADC lines and PZEM-017 registers are fuzzed in tests/collectors/test_psu_lines.py;
this file covers the rest. Inputs are real samples with tokens swapped for known troublemakers
(digits ``int()`` refuses, huge numbers, brackets, NUL), cut short, or plain random text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rigmon.agent.api import _sse
from rigmon.alarms.selector import SelectorError, parse_selector
from rigmon.cluster.agent_answers import bounded_lines
from rigmon.cluster.client import SamplesPage
from rigmon.cluster.sse import SseEvent, SseParser
from rigmon.collectors.disks import parse_diskstats
from rigmon.collectors.host_proc import parse_loadavg, parse_meminfo, parse_net_dev, parse_proc_stat, parse_uptime
from rigmon.collectors.kernel_log_formats import detect_log_format, is_journal_marker, parse_log_record
from rigmon.collectors.kernel_log import (
    KernelLogMatcher,
    parse_aer,
    parse_kmsg_record,
    parse_off_bus,
    parse_pci_bus_id,
    parse_xid,
)
from rigmon.collectors.nvme import parse_link_speed, parse_link_width
from rigmon.collectors.mdstat import MdstatError, parse_mdstat, parse_sync_completed
from rigmon.collectors.thunderbolt import parse_lanes, parse_tb_speed
from rigmon.schema import Frame, Gap, Info, SchemaError, decode
from tests.fuzz.strategies import fuzz_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def _fixture(name: str) -> tuple[str, ...]:
    """The contents of every scenario folder's ``name`` (real captures)."""
    found = tuple(p.read_text() for p in sorted((FIXTURES / "hosts").glob(f"*/{name}")))
    assert found, name
    return found


MDSTAT = _fixture("proc/mdstat") + (
    "md0 : active raid1 sdb1[1] sda1[0]\n      1953382400 blocks super 1.2 [2/2] [UU]\n"
    "      [=>...................]  resync =  8.4% (164089856/1953382400) finish=151.8min speed=196345K/sec\n",
    "md2 : active (auto-read-only) raid1 sdb3[1] sda3[0]\n      1000 blocks [2/2] [UU]\n"
    "        resync=PENDING\n",
)
DISKSTATS = _fixture("proc/diskstats") + ("   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n",)
PROC_STAT = _fixture("proc/stat")
NET_DEV = _fixture("proc/net/dev")
MEMINFO = _fixture("proc/meminfo")
KMSG = (
    "4,51235,1843221988,-;NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.\n",
    "6,2081,5144212,-,caller=T412;text with \\x5c and \\x0a\n SUBSYSTEM=pci\n DEVICE=+pci:0000:1a:00.0\n",
    "3,900,77,-;pcieport 0000:00:03.0: AER: Corrected error received: 0000:1b:00.0\n",
    "3,901,78,-;NVRM: GPU at PCI:0000:1c:00: GPU-1234\n",
    "3,902,79,-;NVRM: GPU 0000:1c:00.0: GPU has fallen off the bus.\n",
    "4,903,80,-;nvidia 0000:1b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
    "(Receiver ID)\n",
) + _fixture("var/log/dmesg") + _fixture("var/log/syslog")
TB_SPEED = ("20.0 Gb/s", "10 Gb/s", "40.0 Gb/s", "2")
SELECTORS = ("psu_rail.volts.min_volts", "gpus[*].nvlinks[*].replay_total", "collectors.*.state",
             "net[name=enp1s0.10].speed_mbps", "gpus[0].power_w", "raid_arrays[name=md0].members[role=faulty]",
             "peer_paths[key_mismatch=false,name='a,b'].state", "net[name=\"o'brien]\", kind = ethernet].mtu")


def _contract(fn: Any, text: str, *allowed: type[BaseException]) -> Any:
    """Call ``fn(text)``; only ``allowed`` may escape (anything else fails with the input shown)."""
    try:
        return fn(text)
    except allowed:
        return None


@FUZZ
@given(fuzz_text(*MDSTAT))
def test_mdstat_raises_only_mdstat_error(text: str) -> None:
    for array in _contract(parse_mdstat, text, MdstatError) or ():
        assert array.name and not any(c.isspace() for c in array.name)


@FUZZ
@given(fuzz_text(*DISKSTATS))
def test_diskstats_never_raises(text: str) -> None:
    parsed = parse_diskstats(text)
    assert len(parsed.disks) + len(parsed.partial) + len(parsed.skipped) <= len(text.splitlines())
    for disk in parsed.disks:
        assert min(disk.reads, disk.read_sectors, disk.writes, disk.write_sectors, disk.io_ms) >= 0


@FUZZ
@given(fuzz_text(*PROC_STAT))
@example("cpu  1 2 3 -100 0 0 0 0\n")
def test_proc_stat_raises_only_value_error(text: str) -> None:
    cpu = _contract(parse_proc_stat, text, ValueError)
    if cpu is not None:
        assert cpu.busy <= cpu.total


@FUZZ
@given(fuzz_text(*NET_DEV))
def test_net_dev_never_raises(text: str) -> None:
    parsed = parse_net_dev(text)
    assert len(parsed.interfaces) + len(parsed.skipped) <= len(text.splitlines())


@FUZZ
@given(fuzz_text(*MEMINFO))
@example("MemTotal:       ² kB\n")
def test_meminfo_never_raises(text: str) -> None:
    assert all(v >= 0 for v in parse_meminfo(text).values())


@FUZZ
@given(fuzz_text("0.20 0.18 0.12 1/80 11206\n", "350735.47 234388.90\n"))
@example(" \n")
def test_loadavg_and_uptime(text: str) -> None:
    _contract(parse_loadavg, text, ValueError)
    uptime = parse_uptime(text)
    assert uptime is None or (math.isfinite(uptime) and uptime >= 0)


@FUZZ
@given(fuzz_text(*KMSG))
@example("²,1,2,-;NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.\n")
def test_kmsg_records_and_matchers_never_raise(text: str) -> None:
    record = parse_kmsg_record(text)
    matcher = KernelLogMatcher()
    if record is not None:
        assert 0 <= record.level <= 7
        matcher.feed(record)
    for parse in (parse_xid, parse_aer, parse_off_bus, parse_pci_bus_id, detect_log_format, is_journal_marker):
        parse(text)
    for fmt in ("kmsg", "dmesg", "journal"):
        text_record = parse_log_record(text, fmt, 1)  # type: ignore[arg-type]
        if text_record is not None:
            matcher.feed(text_record)


@FUZZ
@given(fuzz_text(*TB_SPEED))
def test_link_speed_strings(text: str) -> None:
    for parse in (parse_tb_speed, parse_link_speed):
        speed = parse(text)
        assert speed is None or isinstance(speed, float)
    for count in (parse_lanes, parse_link_width):
        lanes = count(text)
        assert lanes is None or lanes > 0
    done = parse_sync_completed(text)
    assert done is None or len(done) == 2


@FUZZ
@given(fuzz_text(*SELECTORS))
def test_selector_raises_only_selector_error(text: str) -> None:
    selector = _contract(parse_selector, text, SelectorError)
    if selector is not None:
        assert selector.steps


# -- the wire schema decoder ----------------------------------------------------------------------

GOLDEN = json.loads((FIXTURES / "golden" / "snapshot-v1.json").read_text())
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12)


@st.composite
def mangled_frame(draw: st.DrawFn) -> str:
    """The golden frame with a few values at random paths replaced by any JSON."""
    data = json.loads(json.dumps(GOLDEN))
    for _ in range(draw(st.integers(1, 3))):
        node: Any = data
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
            if not isinstance(node[key], (dict, list)) or draw(st.integers(0, 3)) == 0:
                node[key] = draw(JSON_VALUE)
                break
            node = node[key]
    return json.dumps(data)


@FUZZ
@given(st.one_of(mangled_frame(), st.text(max_size=100), st.binary(max_size=100).map(lambda b: b.decode("latin-1"))))
def test_decode_raises_only_schema_error(text: str) -> None:
    for cls in (Frame, Info, Gap, SamplesPage):
        _contract(lambda t, c=cls: decode(c, t), text, SchemaError)


@pytest.mark.parametrize("raw", [b"[" * 100_000, b'{"a":' * 50_000, b"\xff\xfe", b""],
                         ids=["deep-list", "deep-object", "not-utf8", "empty"])
def test_decode_of_hostile_bytes_is_a_schema_error(raw: bytes) -> None:
    with pytest.raises(SchemaError):
        decode(Frame, raw)


# -- the dashboard's SSE parser -------------------------------------------------------------------

@FUZZ
@given(st.lists(fuzz_text("id: 7", "event: frame", "data: {}", ": keepalive", "", "retry: 10"), max_size=30))
def test_sse_parser_takes_any_lines(lines: list[str]) -> None:
    parser = SseParser()
    for line in lines:
        event = parser.feed(line)
        assert event is None or (line == "" and isinstance(event, SseEvent))


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(["frame", "gap"]), st.text(alphabet=st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=50), st.integers(0, 2**53)), max_size=10))
def test_sse_round_trip_of_what_the_agent_sends(events: list[tuple[str, str, int]]) -> None:
    wire = b"".join(_sse(kind, data.encode(), seq) for kind, data, seq in events) + b": keepalive\n\n"
    parser = SseParser()
    got = [e for line in wire.decode().split("\n") if (e := parser.feed(line)) is not None]
    assert [(e.event, e.data, e.id) for e in got] == [(k, d, str(s)) for k, d, s in events]


@FUZZ
@given(st.text(alphabet=st.sampled_from(["a", "é", ":", " ", "\r", "\n", "\u2028", "{"]), max_size=60),
       st.lists(st.integers(1, 8), max_size=20))
async def test_client_line_splitting_matches_the_event_stream_rules(text: str, cuts: list[int]) -> None:
    """However the bytes are chunked, lines end only at CR, LF or CRLF (not at U+2028)."""
    raw = text.encode()
    pieces, at = [], 0
    for size in cuts:
        pieces.append(raw[at:at + size])
        at += size
    pieces.append(raw[at:])

    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    expected = re.split(r"\r\n|\r|\n", text)
    if expected and expected[-1] == "":
        expected.pop()
    got = [line async for line in bounded_lines(httpx.Response(200, content=body()), 1000)]
    assert got == expected
