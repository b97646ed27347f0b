"""How the wire schema's records and fields become Prometheus names, units and help (`rigmon.agent.metrics`).

A record type gets a prefix and identity labels (`RECORD_METRICS`), and each numeric field becomes a
series named by Prometheus conventions (`metric_name`: ``power_w`` -> ``_watts``, ``temp_c`` ->
``_celsius``, ``util_pct`` -> ``_ratio``, ``*_total`` -> a raw counter so that ``rate()`` works).
"""

from __future__ import annotations

import typing

import msgspec

from rigmon.schema import (
    AmdGpuReading,
    CurrentEnvelope,
    DiskReading,
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
    TemperatureReading,
    ThunderboltDeviceReading,
    VoltageEnvelope,
)

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
        info: text fields (``"device_name=model"`` renames as in ``labels``) that become the labels of one
            ``rigmon_<prefix>_info`` series of value 1 beside the item's identity labels, as node_exporter's
            ``node_nvme_info``: what an alert's summary or a table joins on to name the hardware
            (``on (node, device) group_left (vendor, model)``), kept off every other series.
    """

    prefix: str
    labels: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    key_label: str = ""
    info: tuple[str, ...] = ()


#: One entry per record type of `Readings`; a type missing here is not exported.
RECORD_METRICS: dict[type, RecordMetrics] = {
    HostReading: RecordMetrics("host", skip=("boot_id",)),
    TemperatureReading: RecordMetrics("temperature", labels=("sensor", "label")),
    # The interface's kind (ethernet, thunderbolt-net, bond, wifi, virtual...) is what RigmonNetworkLinkFlapped
    # keeps to: a veth or Wi-Fi coming and going is its software's business, as in the node rules.
    NetInterfaceReading: RecordMetrics("network", labels=("name=interface",), skip=("operstate",), info=("kind",)),
    # read_iops and write_iops are rate() of reads_total and writes_total, exported as counters.
    DiskReading: RecordMetrics("disk", labels=("name=device",), skip=("major", "minor", "read_iops", "write_iops")),
    RaidArrayReading: RecordMetrics("md", labels=("name=array", "md_name")),
    # A member's slot and its number in the superblock are ids, not measurements: labels of its info series.
    RaidMemberReading: RecordMetrics("md_member", labels=("name=member",), skip=("device", "slot"),
                                     info=("slot", "device=number")),
    NvmeReading: RecordMetrics("nvme", labels=("name=controller",), info=("model", "firmware")),
    # The router's vendor and model name the enclosure in RigmonThunderboltLinkDegraded (``0-1 (OWC Express 1M2)``);
    # its domain (the host controller it hangs off) is an id, not a measurement: a label there too.
    ThunderboltDeviceReading: RecordMetrics("thunderbolt", labels=("name=device", "kind"),
                                            skip=("expected_source", "domain"),
                                            info=("vendor", "device_name=model", "nvm_version", "domain")),
    # Named after node_exporter's infiniband collector (node_infiniband_*): rigmon_infiniband_*.
    # The port's interface in rigmon_infiniband_info{interface=...} ties it to the [[peers]] paths over it
    # (rigmon_peer_path_*{interface=...}): RigmonPeerPathSilent holds back while that port is down.
    InfinibandPortReading: RecordMetrics("infiniband", labels=("device", "port", "link_layer"),
                                         skip=("name", "expected_source"),
                                         info=("netdev=interface", "hca_type", "board_id", "fw_version=firmware")),
    RdmaHwCounterReading: RecordMetrics("infiniband_hw", labels=("name=counter",)),
    # Latency probes (issue 21): rigmon_peer_path_rtt_p99_seconds{peer="node02",path="tbnet"}.
    PeerPathReading: RecordMetrics("peer_path", labels=("peer", "path", "transport", "interface"),
                                   # sent/received of the window would clash with the *_total counters'
                                   # family names; loss_ratio carries them.
                                   skip=("name", "address", "sent", "received", "error")),
    ProbeResponderReading: RecordMetrics("probe_responder", labels=("address",),
                                         skip=("last_refused_from", "last_refused_reason", "flood_from",
                                               "refusing_key_from")),
    GpuReading: RecordMetrics("gpu", labels=("index=gpu", "uuid"), info=("name=model",)),
    NvLinkReading: RecordMetrics("gpu_nvlink", labels=("link",)),
    # agent_other_pid_ns is the agent's, not each process's (in_namespace says it of each).
    GpuProcessReading: RecordMetrics("gpu_process", labels=("pid", "vendor", "gpu_index=gpu", "pci_bus_id", "user",
                                                            "command"),
                                     skip=("cmdline", "gpu_uuid", "uid", "kind", "state", "agent_other_pid_ns")),
    # The DRM card number follows the drivers' probe order and may change at a reboot: as a label it continued one
    # GPU's series as another's. The PCI address is the GPU's of every boot; this boot's card is info.
    AmdGpuReading: RecordMetrics("amd_gpu", labels=("pci_bus_id",), info=("card",)),
    KernelLogReading: RecordMetrics("kernel_log"),
    # The ADC's id comes with its first window, a second or two after the port opened: as a label it made every
    # rail series twice at each agent start (device_id "" and then the id). It names the board: info.
    PsuRailReading: RecordMetrics("psu_rail", labels=("port",), skip=("seq", "flags"),
                                  info=("device_id", "firmware", "sensor")),
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
    (PsuRailReading, "windows"): ("frame_windows", ("ADC windows that arrived since the previous frame "
                                                   "(0: the last window is repeated); all of them: "
                                                   "rigmon_psu_rail_windows_total")),
    # Units in the name: the MTU is in bytes (node_exporter's node_network_mtu_bytes); the guard's two
    # times are Unix seconds, which a bare `rigmon_guard_released_until` did not say.
    (NetInterfaceReading, "mtu"): ("mtu_bytes", ""),
    # Beside rigmon_psu_path_trend_ohms_per_second, `rigmon_psu_path_trend_seconds` read as the trend in seconds.
    (PathResistanceReading, "trend_days"): ("trend_span_days", ("the span of the daily estimates the trend is "
                                                               "fitted over (rigmon_psu_path_trend_ohms_per_second)")),
    (GuardReading, "released_until"): ("released_until_at", "an operator's release keeps the guard away until then"),
    (GuardReading, "unread_since"): ("unread_since_at", ("when it last read all it watches (it holds the caps "
                                                        "while it cannot)")),
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
    # A host temperature's limits: RigmonHostTempCritical compares rigmon_temperature_temp_celsius with the crit.
    (TemperatureReading, "max_c"): "the sensor's high limit (hwmon tempN_max: an NVMe's warning temperature; "
                                   "a thermal zone's hot trip point); no series when it has none",
    (TemperatureReading, "crit_c"): "the sensor's critical limit (hwmon tempN_crit: a CPU's TjMax, an NVMe's CCTEMP; "
                                    "a thermal zone's critical trip point, where the kernel powers off); "
                                    "no series when it has none",
    (TemperatureReading, "over_crit"): "1 while the sensor is at or over its critical limit "
                                       "(rigmon_temperature_crit_celsius); no series when it has none",
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
    (PathResistanceReading, "trend_days"): ("rigmon_psu_path_trend_seconds", 86400.0, ""),
    # Ids that were gauges, now labels of the item's info series.
    (ThunderboltDeviceReading, "domain"): ("rigmon_thunderbolt_domain", 1.0, "the domain label of rigmon_thunderbolt_info"),
    (RaidMemberReading, "slot"): ("rigmon_md_member_slot", 1.0, "the slot label of rigmon_md_member_info"),
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


def help_text(doc_type: str, field: str, metric: str, scale: float, what: str = "") -> str:
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


def literal_values(tp: object) -> tuple[str, ...] | None:
    """The allowed values of a ``Literal`` (or ``Literal | None``) field, else None."""
    for candidate in (tp, *typing.get_args(tp)):
        if typing.get_origin(candidate) is typing.Literal:
            return tuple(str(v) for v in typing.get_args(candidate))
    return None


def is_number(tp: object) -> bool:
    args = typing.get_args(tp) or (tp,)
    return any(a in (int, float, bool) for a in args)
