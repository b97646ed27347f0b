"""Prometheus exposition of the agent's readings through prometheus_client (/metrics).

Metric names are derived from the wire schema, whose field names carry their unit
(`rigmon.agent.metric_names`): a frame is walked record by record, each numeric field a series.
A source added to the schema later only needs its entry in `RECORD_METRICS`.
"""

from __future__ import annotations

import typing
from collections import Counter, deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

from rigmon.agent.metric_names import (
    DEPRECATED,
    MEANING,
    PREFIX,
    RECORD_METRICS,
    RENAMED,
    RecordMetrics,
    help_text,
    is_number,
    literal_values,
    metric_name,
)
from rigmon.agent.metrics_infiniband import HELP as SATURATED_HELP
from rigmon.agent.metrics_infiniband import NAME as SATURATED_NAME
from rigmon.agent.metrics_infiniband import saturated_counters
from rigmon.agent.metrics_recent import RecentHighest
from rigmon.alarms.event_reports import XidReports
from rigmon.schema import Event, Frame, Readings, Record
from rigmon.typed import field_types

if TYPE_CHECKING:
    # prometheus_client is imported when /metrics is first scraped, not when the agent starts
    # (it costs the agent's first frame ~20 ms of imports and most agents are never scraped).
    from prometheus_client.core import Metric
    from prometheus_client.registry import CollectorRegistry

#: Re-exported: the names other modules and the tests take from here.
__all__ = ["DEPRECATED", "PREFIX", "RAIL_LOWEST_SPAN_S", "RECORD_METRICS", "FrameCollector", "RecordMetrics", "frame_metrics",
           "make_registry", "metric_name"]


class _Families:
    """Collects samples per metric name while walking a frame."""

    def __init__(self) -> None:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        self.families: dict[str, Metric] = {}
        self._kinds = (GaugeMetricFamily, CounterMetricFamily)

    def add(self, name: str, doc: str, counter: bool, labels: dict[str, str], value: float) -> None:
        if not all(v.isascii() for v in labels.values()):
            labels = {k: _encodable(v) for k, v in labels.items()}
        family = self.families.get(name)
        if family is None:
            cls = self._kinds[counter]
            family = cls(name, doc, labels=list(labels))
            self.families[name] = family
        family.add_metric(list(labels.values()), value)  # type: ignore[attr-defined]


def _encodable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (a lone surrogate: undecodable bytes of a name from
    ``os.listdir``) as ``?``: the exposition is encoded whole, so one such label failed every series."""
    return text.encode("utf-8", "replace").decode("utf-8")


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
    for port in frame.readings.infiniband:
        labels = {**node, "device": port.device, "port": str(port.port), "link_layer": port.link_layer or ""}
        for counter, saturated in saturated_counters(port):
            fam.add(SATURATED_NAME, SATURATED_HELP, False, {**labels, "counter": counter}, 1.0 if saturated else 0.0)
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
    if spec.info:
        _info_metric(fam, record, spec, doc_type, labels)
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
        states = literal_values(tp)
        if states is not None:
            for state in states:
                fam.add(f"{PREFIX}_{spec.prefix}_{name}", f"{doc_type}.{name} (1 for the current value)", False,
                        {**labels, name: state}, 1.0 if value == state else 0.0)
            continue
        # A field added later is UNSET in a record built without it (an older agent's, a recording's): no series,
        # as None; float(UNSET) failed the whole scrape.
        if value is None or value is msgspec.UNSET or not is_number(tp) or isinstance(value, str):
            continue
        renamed, what = RENAMED.get((type(record), name), (name, MEANING.get((type(record), name), "")))
        metric, scale, counter = metric_name(spec.prefix, renamed)
        fam.add(metric, help_text(doc_type, name, metric, scale, what), counter, labels, float(value) * scale)
        old = DEPRECATED.get((type(record), name))
        if old is not None:
            _deprecated(fam, old, doc_type, name, metric, counter, labels, value, what)


def _info_metric(fam: _Families, record: object, spec: RecordMetrics, doc_type: str, labels: dict[str, str]) -> None:
    """The record's text fields named in ``spec.info`` as the labels of one series of value 1 (an unread one: "")."""
    info = dict(labels)
    for label in spec.info:
        field_name, _, label_name = label.partition("=")
        value = getattr(record, field_name)
        # A field added later is UNSET in a record built without it: unread, as None.
        info[label_name or field_name] = "" if value is None or value is msgspec.UNSET else str(value)
    fields = ", ".join(f"{field} as {name}" if name else field
                       for field, _, name in (label.partition("=") for label in spec.info))
    fam.add(f"{PREFIX}_{spec.prefix}_info", f"{doc_type} {fields} as labels (value 1; empty when unread)", False,
            info, 1.0)


def _deprecated(fam: _Families, old: tuple[str, float, str], doc_type: str, field: str, metric: str, counter: bool,
                labels: dict[str, str], value: object, what: str = "") -> None:
    """The series a field was exported as before, for one release, with a HELP naming what replaces it
    (and ``what`` the series is: a dashboard still on the old name shows this HELP)."""
    name, scale, replacement = old
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    fam.add(name, f"DEPRECATED (removed in the next release): use {replacement or metric}; {doc_type}.{field}"
            + (f": {what}" if what else ""), counter, labels, float(value) * scale)


#: Span of `rigmon_psu_rail_lowest_volts` and `rigmon_gpu_power_highest_watts`: longer than any sane scrape interval.
RAIL_LOWEST_SPAN_S = 60.0


class FrameCollector:
    """A prometheus_client collector serving the newest frame of an agent (what a registry calls is `collect`).

    A scrape sees one frame, but the agent makes one a second (and more when a sag is
    pushed): so that a sag between two scrapes is not lost, the lowest rail minimum of the
    last `RAIL_LOWEST_SPAN_S` is exported as its own series, and so is whether the ADC's
    hardware under-voltage comparator latched in that span (a flag of one window), and each GPU's
    highest power reading or peak between polls in that span.
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
        #: Each GPU's power peaks (and readings) by (index, uuid), for `rigmon_gpu_power_highest_watts`.
        self._gpu_peaks: RecentHighest[tuple[int, str]] = RecentHighest(RAIL_LOWEST_SPAN_S)

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
        for gpu in frame.readings.gpus:
            readings = [w for w in (gpu.power_peak_w, gpu.power_w) if w is not None]
            if readings:
                self._gpu_peaks.add((gpu.index, gpu.uuid or ""), frame.taken_at, max(readings))
        self._gpu_peaks.keep_only((gpu.index, gpu.uuid or "") for gpu in frame.readings.gpus)

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
        metrics.extend(self._gpu_peak_metrics(frame))
        metrics.extend(self._mark_metrics(frame.node))
        return iter(metrics)

    def _gpu_peak_metrics(self, frame: Frame) -> list[Metric]:
        """Each GPU's highest power of the span, for the GPUs in ``frame`` that read one in it."""
        highest = self._gpu_peaks.highest(frame.taken_at)
        present = [(gpu.index, gpu.uuid or "") for gpu in frame.readings.gpus]
        if not any(key in highest for key in present):
            return []
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(f"{PREFIX}_gpu_power_highest_watts",
                                   f"highest power of the GPU in the last {RAIL_LOWEST_SPAN_S:.0f} s: its peaks "
                                   "between polls (the driver's sample buffer) and readings, which a scrape would miss",
                                   labels=["node", "gpu", "uuid"])
        for index, uuid in present:
            if (index, uuid) in highest:
                family.add_metric([frame.node, str(index), uuid], highest[(index, uuid)])
        return [family]

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
