"""Prometheus exposition of the agent's readings through prometheus_client (/metrics).

Metric names are derived from the wire schema, whose field names carry their unit: a
record type gets a prefix and identity labels (`RECORD_METRICS`), and each numeric field
becomes a series named by Prometheus conventions (`power_w` -> `_watts`, `temp_c` ->
`_celsius`, `util_pct` -> `_ratio`, `*_total` -> a raw counter so that ``rate()`` works).
A source added to the schema later only needs its entry in `RECORD_METRICS`.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING
from collections import Counter, deque
from collections.abc import Iterator

import msgspec

from rigmon.alarms.event_reports import XidReports
from rigmon.schema import (
    AmdGpuReading,
    CurrentEnvelope,
    DiskReading,
    Event,
    Frame,
    GpuProcessReading,
    GpuReading,
    GuardGpuSettings,
    GuardReading,
    HostReading,
    HwmonVoltageReading,
    InfinibandPortReading,
    KernelLogReading,
    NetInterfaceReading,
    NvLinkReading,
    NvmeReading,
    PathResistanceReading,
    PeerPathReading,
    PmbusPsuReading,
    ProbeResponderReading,
    PsuRailReading,
    RaidArrayReading,
    RaidMemberReading,
    RdmaHwCounterReading,
    Readings,
    Record,
    TemperatureReading,
    ThunderboltDeviceReading,
    VoltageEnvelope,
)
from rigmon.typed import field_types

if TYPE_CHECKING:
    # prometheus_client is imported when /metrics is first scraped, not when the agent starts
    # (it costs the agent's first frame ~20 ms of imports and most agents are never scraped).
    from prometheus_client.core import Metric
    from prometheus_client.registry import CollectorRegistry

PREFIX = "rigmon"


class RecordMetrics(msgspec.Struct, frozen=True, gc=False):
    """How one record type becomes metrics.

    Attributes:
        prefix: inserted after ``rigmon_`` (``gpu`` -> ``rigmon_gpu_power_watts``).
        labels: fields that identify the item (become labels, not series); ``"index=gpu"``
            exports field ``index`` as label ``gpu``. Records nested in a record (md members in
            an array, NVLinks in a GPU) carry their parent's labels too.
        skip: fields not exported (free text, or already exported another way).
        key_label: the label holding the key when records of this type are the values of a
            ``dict`` field (the rail's channels by name).
    """

    prefix: str
    labels: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    key_label: str = ""


#: One entry per record type of `Readings`; a type missing here is not exported.
RECORD_METRICS: dict[type, RecordMetrics] = {
    HostReading: RecordMetrics("host", skip=("boot_id",)),
    TemperatureReading: RecordMetrics("temperature", labels=("sensor", "label")),
    NetInterfaceReading: RecordMetrics("network", labels=("name=interface",), skip=("operstate",)),
    # read_iops and write_iops are rate() of reads_total and writes_total, exported as counters.
    DiskReading: RecordMetrics("disk", labels=("name=device",), skip=("major", "minor", "read_iops", "write_iops")),
    RaidArrayReading: RecordMetrics("md", labels=("name=array", "md_name")),
    RaidMemberReading: RecordMetrics("md_member", labels=("name=member",), skip=("device",)),
    NvmeReading: RecordMetrics("nvme", labels=("name=controller",)),
    ThunderboltDeviceReading: RecordMetrics("thunderbolt", labels=("name=device", "kind"),
                                            skip=("expected_source",)),
    # Named after node_exporter's infiniband collector (node_infiniband_*): rigmon_infiniband_*.
    InfinibandPortReading: RecordMetrics("infiniband", labels=("device", "port", "link_layer"),
                                         skip=("name", "expected_source")),
    RdmaHwCounterReading: RecordMetrics("infiniband_hw", labels=("name=counter",)),
    # Latency probes (issue 21): rigmon_peer_path_rtt_p99_seconds{peer="node02",path="tbnet"}.
    PeerPathReading: RecordMetrics("peer_path", labels=("peer", "path", "transport", "interface"),
                                   # sent/received of the window would clash with the *_total counters'
                                   # family names; loss_ratio carries them.
                                   skip=("name", "address", "sent", "received", "error")),
    ProbeResponderReading: RecordMetrics("probe_responder", labels=("address",),
                                         skip=("last_refused_from", "last_refused_reason", "flood_from",
                                               "refusing_key_from")),
    GpuReading: RecordMetrics("gpu", labels=("index=gpu", "uuid")),
    NvLinkReading: RecordMetrics("gpu_nvlink", labels=("link",)),
    # agent_other_pid_ns is the agent's, not each process's (in_namespace says it of each).
    GpuProcessReading: RecordMetrics("gpu_process", labels=("pid", "vendor", "gpu_index=gpu", "pci_bus_id", "user",
                                                            "command"),
                                     skip=("cmdline", "gpu_uuid", "uid", "kind", "state", "agent_other_pid_ns")),
    AmdGpuReading: RecordMetrics("amd_gpu", labels=("card", "pci_bus_id")),
    KernelLogReading: RecordMetrics("kernel_log"),
    PsuRailReading: RecordMetrics("psu_rail", labels=("port", "device_id"), skip=("seq", "flags")),
    VoltageEnvelope: RecordMetrics("psu_channel", key_label="channel"),
    CurrentEnvelope: RecordMetrics("psu_channel", key_label="channel"),
    PathResistanceReading: RecordMetrics("psu_path", labels=("path",)),
    HwmonVoltageReading: RecordMetrics("hwmon", labels=("sensor", "chip", "label"), skip=("scale",)),
    PmbusPsuReading: RecordMetrics("pmbus_psu", labels=("sensor", "chip")),
    # The settings the guard put in place; the originals (same labels) stay in frames and events.
    GuardReading: RecordMetrics("guard", skip=("original", "gpus", "off_bus")),
    GuardGpuSettings: RecordMetrics("guard_gpu", labels=("index=gpu",)),
}

#: Fields exported under another name than their own: (record type, field) -> (the name the series is
#: derived from, units converted as usual; what it is, for HELP). A Thunderbolt link's ``rx_gbps`` is
#: what the link can carry, which ``rigmon_thunderbolt_rx_bytes_per_second`` had Grafana users read as traffic.
RENAMED: dict[tuple[type, str], tuple[str, str]] = {
    (ThunderboltDeviceReading, "rx_gbps"): ("rx_capacity_gbps",
                                            "what the link can receive (lane speed x lanes), not traffic"),
    (ThunderboltDeviceReading, "tx_gbps"): ("tx_capacity_gbps",
                                            "what the link can send (lane speed x lanes), not traffic"),
    (ThunderboltDeviceReading, "expected_gbps"): ("expected_capacity_gbps",
                                                  "the capacity per direction the link should have, not traffic"),
    # ``rigmon_psu_rail_windows`` (a gauge) and the counter ``rigmon_psu_rail_windows_total`` (the ADC's
    # ``windows_total``) are one family, ``rigmon_psu_rail_windows``, in the OpenMetrics format.
    (PsuRailReading, "windows"): ("frame_windows", "ADC windows that arrived since the previous frame "
                                                   "(0: the last window is repeated); all of them: "
                                                   "rigmon_psu_rail_windows_total"),
    # Units in the name: the MTU is in bytes (node_exporter's node_network_mtu_bytes); the guard's two
    # times are Unix seconds, which a bare `rigmon_guard_released_until` did not say.
    (NetInterfaceReading, "mtu"): ("mtu_bytes", ""),
    (GuardReading, "released_until"): ("released_until_at", "an operator's release keeps the guard away until then"),
    (GuardReading, "unread_since"): ("unread_since_at", "when it last read all it watches (it holds the caps "
                                                        "while it cannot)"),
}

#: What a series kept under its own name is, for HELP, where the name alone reads as traffic: a link's
#: speed or rate is what it can carry, whatever it carries.
MEANING: dict[tuple[type, str], str] = {
    (ThunderboltDeviceReading, "rx_speed_gbps"): "what one receive lane can carry (the link's speed per lane; "
                                                 "times the lanes: rigmon_thunderbolt_rx_capacity_bytes_per_second), "
                                                 "not traffic",
    (ThunderboltDeviceReading, "tx_speed_gbps"): "what one send lane can carry (the link's speed per lane; "
                                                 "times the lanes: rigmon_thunderbolt_tx_capacity_bytes_per_second), "
                                                 "not traffic",
    (InfinibandPortReading, "rate_gbps"): "the rate the port trained at, what it can carry per direction "
                                          "(100 Gb/sec 4X EDR = 12.5e9), not traffic: that is "
                                          "rate(rigmon_infiniband_port_data_received_bytes_total[1m])",
    (InfinibandPortReading, "expected_gbps"): "the rate the port should train at (configured, else the best seen "
                                              "since the agent started), not traffic: below it the port is degraded",
    (PeerPathReading, "link_gbps"): "the speed of the local interface carrying this path, what it can carry, "
                                    "not traffic on it nor what the path achieves",
    (NetInterfaceReading, "speed_mbps"): "the speed the interface negotiated, what it can carry, not traffic: "
                                         "that is rate(rigmon_network_rx_bytes_total[1m])",
}

#: Series renamed, rescaled to base units or dropped, still exported under their old name (and in
#: their old unit) until the next release: (record type, field) -> (old name, old scale, what
#: replaces it; empty: the series the field is exported as now).
DEPRECATED: dict[tuple[type, str], tuple[str, float, str]] = {
    (ThunderboltDeviceReading, "rx_gbps"): ("rigmon_thunderbolt_rx_bytes_per_second", 1e9 / 8, ""),
    (ThunderboltDeviceReading, "tx_gbps"): ("rigmon_thunderbolt_tx_bytes_per_second", 1e9 / 8, ""),
    (ThunderboltDeviceReading, "expected_gbps"): ("rigmon_thunderbolt_expected_bytes_per_second", 1e9 / 8, ""),
    (PathResistanceReading, "trend_mohm_per_day"): ("rigmon_psu_path_trend_ohms_per_day", 1e-3, ""),
    (DiskReading, "read_iops"): ("rigmon_disk_read_iops", 1.0, "rate(rigmon_disk_reads_total[1m])"),
    (DiskReading, "write_iops"): ("rigmon_disk_write_iops", 1.0, "rate(rigmon_disk_writes_total[1m])"),
    (NetInterfaceReading, "mtu"): ("rigmon_network_mtu", 1.0, ""),
    # In the text format only: in OpenMetrics it is the counter's family (`metrics_exposition`).
    (PsuRailReading, "windows"): ("rigmon_psu_rail_windows", 1.0, ""),
}

# (field suffix, metric suffix, scale). Order matters: longer suffixes first (of the metric
# suffixes too: `_help` finds a series' unit by them).
_UNITS: tuple[tuple[str, str, float], ...] = (
    ("_bytes_per_s", "_bytes_per_second", 1.0),
    ("_packets_per_s", "_packets_per_second", 1.0),
    # The base unit of time is the second: a trend of 0.05 mOhm a day is 5.8e-10 ohms per second.
    ("_mohm_per_day", "_ohms_per_second", 1e-3 / 86400),
    ("_gts", "_transfers_per_second", 1e9),
    ("_per_s", "_per_second", 1.0),
    ("_mohm", "_ohms", 1e-3),
    ("_days", "_seconds", 86400.0),
    ("_mhz", "_hertz", 1e6),
    # Link speeds are megabits or gigabits in the schema; Prometheus' base unit is bytes.
    ("_mbps", "_bytes_per_second", 1e6 / 8),
    ("_gbps", "_bytes_per_second", 1e9 / 8),
    ("_pct", "_ratio", 0.01),
    ("_ms", "_seconds", 1e-3),
    ("_us", "_seconds", 1e-6),
    ("_mj", "_joules", 1e-3),
    ("_j", "_joules", 1.0),
    ("_volts", "_volts", 1.0),
    ("_wh", "_joules", 3600.0),
    ("_rpm", "_rpm", 1.0),
    ("_amps", "_amperes", 1.0),
    ("_w", "_watts", 1.0),
    ("_c", "_celsius", 1.0),
    ("_bytes", "_bytes", 1.0),
    ("_at", "_timestamp_seconds", 1.0),
    ("_s", "_seconds", 1.0),
)


def metric_name(prefix: str, field: str) -> tuple[str, float, bool]:
    """Prometheus name, scale and counter-ness of a schema field.

    ``rx_bytes_total`` -> (``rigmon_network_rx_bytes_total``, 1, True);
    ``clock_sm_mhz`` -> (``rigmon_gpu_clock_sm_hertz``, 1e6, False).
    """
    if field.endswith("_total"):
        stem, scale, _ = metric_name(prefix, field[: -len("_total")])
        return f"{stem}_total", scale, True
    if field.endswith("_count"):
        # "_count" is reserved for histograms and summaries: cpu_count -> rigmon_host_cpus.
        return f"{PREFIX}_{prefix}_{field[: -len('_count')]}s", 1.0, False
    for suffix, unit, scale in _UNITS:
        if field.endswith(suffix):
            return f"{PREFIX}_{prefix}_{field[: -len(suffix)]}{unit}", scale, False
    return f"{PREFIX}_{prefix}_{field}", 1.0, False


def _help(doc_type: str, field: str, metric: str, scale: float, what: str = "") -> str:
    """HELP text: the schema field it comes from and, when scaled, the base unit it is in now;
    then ``what`` the series is, when its name alone could mislead.

    ``DiskReading.read_await_ms`` alone reads as milliseconds on a series in seconds.
    """
    text = f"{doc_type}.{field}"
    if scale != 1.0:
        unit = metric.removeprefix(PREFIX).removesuffix("_total")
        for _, suffix, _ in _UNITS:
            if unit.endswith(suffix):
                words = "as a ratio (0-1)" if suffix == "_ratio" else "in " + suffix.lstrip("_").replace("_", " ")
                text += f", {words}"
                break
        else:
            text += f", times {scale:g}"
    return f"{text}: {what}" if what else text


def _literal_values(tp: object) -> tuple[str, ...] | None:
    """The allowed values of a ``Literal`` (or ``Literal | None``) field, else None."""
    for candidate in (tp, *typing.get_args(tp)):
        if typing.get_origin(candidate) is typing.Literal:
            return tuple(str(v) for v in typing.get_args(candidate))
    return None


def _is_number(tp: object) -> bool:
    args = typing.get_args(tp) or (tp,)
    return any(a in (int, float, bool) for a in args)


class _Families:
    """Collects samples per metric name while walking a frame."""

    def __init__(self) -> None:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        self.families: dict[str, Metric] = {}
        self._kinds = (GaugeMetricFamily, CounterMetricFamily)

    def add(self, name: str, doc: str, counter: bool, labels: dict[str, str], value: float) -> None:
        family = self.families.get(name)
        if family is None:
            cls = self._kinds[counter]
            family = cls(name, doc, labels=list(labels))
            self.families[name] = family
        family.add_metric(list(labels.values()), value)  # type: ignore[attr-defined]


def frame_metrics(frame: Frame, event_counts: Counter[tuple[str, str, str]]) -> list[Metric]:
    """All metric families for one frame plus the agent's event counters."""
    fam = _Families()
    node = {"node": frame.node}
    for name, status in sorted(frame.collectors.items()):
        labels = {**node, "collector": name}
        fam.add(f"{PREFIX}_collector_up", "1 when the collector's last run succeeded or its hardware is absent",
                False, labels, 1.0 if status.ok else 0.0)
        if status.duration_s is not None:
            fam.add(f"{PREFIX}_collector_duration_seconds", "duration of the collector's last run", False, labels,
                    status.duration_s)
        if status.sampled_at is not None:
            fam.add(f"{PREFIX}_collector_sampled_timestamp_seconds",
                    "when the collector's last run ended (a hung call keeps the one before)", False, labels,
                    status.sampled_at)
        for state in ("ok", "error", "absent", "hung", "pending"):
            fam.add(f"{PREFIX}_collector_state", "collector state (1 for the current one)", False,
                    {**labels, "state": state}, 1.0 if status.state == state else 0.0)
    fam.add(f"{PREFIX}_agent_start_timestamp_seconds", "when this agent run started", False, node, frame.agent_start)
    fam.add(f"{PREFIX}_frame_seq", "sequence number of the newest frame in this agent run", False, node,
            float(frame.seq))
    for name in Readings.__struct_fields__:
        value = getattr(frame.readings, name)
        records = value if isinstance(value, tuple) else (value,) if value is not None else ()
        for record in records:
            _record_metrics(fam, record, node)
    for (kind, subject, code), count in sorted(event_counts.items()):
        fam.add(f"{PREFIX}_events_total", "events since the agent started, by kind, subject and code", True,
                {**node, "kind": kind, "subject": subject, "code": code}, float(count))
    return list(fam.families.values())


def _record_metrics(fam: _Families, record: object, parent: dict[str, str], spec: RecordMetrics | None = None,
                    key: str | None = None) -> None:
    """Add one record's series; nested records follow their parent.

    A tuple of records (md members, NVLinks) uses each child type's own entry and labels; a
    single nested record (the rail's voltage envelope, the ADC's counters) is flattened
    under the parent's prefix; a ``dict`` of records (the rail's channels) uses the child
    type's entry with the key as the label named by its ``key_label``.
    """
    spec = spec or RECORD_METRICS.get(type(record))
    if spec is None:
        return
    labels = dict(parent)
    if key is not None:
        labels[spec.key_label or "key"] = key
    label_fields = set()
    for label in spec.labels:
        field_name, _, label_name = label.partition("=")
        value = getattr(record, field_name)
        labels[label_name or field_name] = "" if value is None else str(value)
        label_fields.add(field_name)
    doc_type = type(record).__name__
    types_ = field_types(type(record))
    for name, tp in types_.items():
        if name in label_fields:
            continue
        if name in spec.skip:
            old = DEPRECATED.get((type(record), name))
            if old is not None:
                _deprecated(fam, old, doc_type, name, "", False, labels, getattr(record, name))
            continue
        value = getattr(record, name)
        if isinstance(value, tuple) and value and isinstance(value[0], Record):
            for child in value:
                _record_metrics(fam, child, labels)
            continue
        if isinstance(value, Record):
            _record_metrics(fam, value, labels, RecordMetrics(spec.prefix))
            continue
        if isinstance(value, dict):
            for child_key, child in sorted(value.items()):
                if isinstance(child, Record) and type(child) in RECORD_METRICS:
                    _record_metrics(fam, child, labels, key=child_key)
            continue
        if name.endswith("_per_s") and f"{name[: -len('_per_s')]}_total" in types_:
            continue  # the raw counter is exported; rate() in PromQL gives this
        states = _literal_values(tp)
        if states is not None:
            for state in states:
                fam.add(f"{PREFIX}_{spec.prefix}_{name}", f"{doc_type}.{name} (1 for the current value)", False,
                        {**labels, name: state}, 1.0 if value == state else 0.0)
            continue
        if value is None or not _is_number(tp) or isinstance(value, str):
            continue
        renamed, what = RENAMED.get((type(record), name), (name, MEANING.get((type(record), name), "")))
        metric, scale, counter = metric_name(spec.prefix, renamed)
        fam.add(metric, _help(doc_type, name, metric, scale, what), counter, labels, float(value) * scale)
        old = DEPRECATED.get((type(record), name))
        if old is not None:
            _deprecated(fam, old, doc_type, name, metric, counter, labels, value, what)


def _deprecated(fam: _Families, old: tuple[str, float, str], doc_type: str, field: str, metric: str, counter: bool,
                labels: dict[str, str], value: object, what: str = "") -> None:
    """The series a field was exported as before, for one release, with a HELP naming what replaces it
    (and ``what`` the series is: a dashboard still on the old name shows this HELP)."""
    name, scale, replacement = old
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    fam.add(name, f"DEPRECATED (removed in the next release): use {replacement or metric}; {doc_type}.{field}"
            + (f": {what}" if what else ""), counter, labels, float(value) * scale)


#: Span of `rigmon_psu_rail_lowest_volts`: longer than any sane scrape interval.
RAIL_LOWEST_SPAN_S = 60.0


class FrameCollector:
    """A prometheus_client collector serving the newest frame of an agent (what a registry calls is `collect`).

    A scrape sees one frame, but the agent makes one a second (and more when a sag is
    pushed): so that a sag between two scrapes is not lost, the lowest rail minimum of the
    last `RAIL_LOWEST_SPAN_S` is exported as its own series, and so is whether the ADC's
    hardware under-voltage comparator latched in that span (a flag of one window).
    """

    def __init__(self, latest: typing.Callable[[], Frame | None], intervals: typing.Mapping[str, float] | None = None
                 ) -> None:
        self._latest = latest
        #: Seconds between runs of each collector, exported so that an alert can allow a slow one its interval.
        self.intervals = dict(intervals or {})
        self.event_counts: Counter[tuple[str, str, str]] = Counter()
        self._rail_minima: deque[tuple[float, float]] = deque()
        #: When a frame last said the ADC's under-voltage comparator latched.
        self._latched_at: float | None = None
        self.marks_total = 0
        self.last_mark: Event | None = None
        #: One Xid reported by NVML and by the kernel log is one Xid in ``rigmon_events_total``, as in
        #: the alarm's count and on the dashboard (both events stay in frames and the journal).
        self._xids = XidReports()

    def observe(self, frame: Frame) -> None:
        """Sampler listener: count the frame's events and keep recent rail minima."""
        for event in frame.events:
            if event.kind == "mark":
                self.marks_total += 1
                self.last_mark = event
            if not self._xids.is_new(event):
                continue
            code = event.data.get("xid", event.data.get("code", ""))
            self.event_counts[(event.kind, event.subject, "" if code is None else str(code))] += 1
        rail = frame.readings.psu_rail
        if rail is not None and rail.volts is not None:
            self._rail_minima.append((frame.taken_at, rail.volts.min_volts))
        if rail is not None and rail.under_voltage_latched:
            self._latched_at = frame.taken_at
        while self._rail_minima and self._rail_minima[0][0] < frame.taken_at - RAIL_LOWEST_SPAN_S:
            self._rail_minima.popleft()

    def collect(self) -> Iterator[Metric]:
        frame = self._latest()
        if frame is None:
            return iter(())
        metrics = frame_metrics(frame, self.event_counts)
        if self.intervals:
            from prometheus_client.core import GaugeMetricFamily

            intervals = GaugeMetricFamily(f"{PREFIX}_collector_interval_seconds",
                                          "seconds between runs of the collector", labels=["node", "collector"])
            for name, interval_s in sorted(self.intervals.items()):
                intervals.add_metric([frame.node, name], interval_s)
            metrics.append(intervals)
        if self._rail_minima and frame.readings.psu_rail is not None:
            from prometheus_client.core import GaugeMetricFamily

            lowest = GaugeMetricFamily(f"{PREFIX}_psu_rail_lowest_volts",
                                       f"lowest 12 V rail window minimum of the last {RAIL_LOWEST_SPAN_S:.0f} s",
                                       labels=["node"])
            lowest.add_metric([frame.node], min(v for _, v in self._rail_minima))
            metrics.append(lowest)
        if frame.readings.psu_rail is not None:
            from prometheus_client.core import GaugeMetricFamily

            latched = GaugeMetricFamily(f"{PREFIX}_psu_rail_under_voltage_latched_recently",
                                        "1 when the rail ADC's hardware under-voltage comparator latched in the last "
                                        f"{RAIL_LOWEST_SPAN_S:.0f} s (a flag of one window, which a scrape would miss)",
                                        labels=["node"])
            recent = self._latched_at is not None and self._latched_at >= frame.taken_at - RAIL_LOWEST_SPAN_S
            latched.add_metric([frame.node], 1.0 if recent else 0.0)
            metrics.append(latched)
        metrics.extend(self._mark_metrics(frame.node))
        return iter(metrics)

    def _mark_metrics(self, node: str) -> list[Metric]:
        """Marks as annotations: a counter (``changes()`` finds them) and the last one's text and time."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        total = CounterMetricFamily(f"{PREFIX}_marks", "marks put on the timeline since the agent started "
                                                        "(POST /v1/marks, rigmon mark)", labels=["node"])
        total.add_metric([node], float(self.marks_total))
        out: list[Metric] = [total]
        mark = self.last_mark
        if mark is not None:
            at = GaugeMetricFamily(f"{PREFIX}_mark_last_timestamp_seconds", "when the last mark was put",
                                   labels=["node"])
            at.add_metric([node], mark.at)
            info = GaugeMetricFamily(f"{PREFIX}_mark_last_info", "the last mark's text (value 1)",
                                     labels=["node", "text"])
            info.add_metric([node, mark.message], 1.0)
            out += [at, info]
        return out


def make_registry(collector: FrameCollector) -> CollectorRegistry:
    """A registry holding only the agent's own metrics (no process/platform collectors)."""
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
