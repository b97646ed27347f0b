"""/metrics in the format the scraper asks for: OpenMetrics (Prometheus asks for it first) or the text format."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from rigmon.agent.metrics import DEPRECATED, FrameCollector, make_registry

if TYPE_CHECKING:
    # prometheus_client is imported when /metrics is first scraped (see `rigmon.agent.metrics`).
    from prometheus_client.core import Metric
    from prometheus_client.registry import CollectorRegistry

#: The names series were exported as before a rename, kept one release beside their replacement.
DEPRECATED_NAMES = frozenset(name for name, _, _ in DEPRECATED.values())


def openmetrics_families(metrics: list[Metric]) -> list[Metric]:
    """The families OpenMetrics can carry: all but a deprecated name that is a counter's family.

    OpenMetrics names a counter's family without ``_total``: the deprecated gauge
    ``rigmon_psu_rail_windows`` beside the counter ``rigmon_psu_rail_windows_total`` would be a
    second family of one name, which OpenMetrics parsers refuse (the whole scrape, not the one
    series) and Prometheus keeps with the counter's TYPE and HELP. The text format names the
    counter with its ``_total`` and serves both.
    """
    counters = {m.name for m in metrics if m.type == "counter"}
    return [m for m in metrics if m.type == "counter" or m.name not in counters or m.name not in DEPRECATED_NAMES]


class _OpenMetricsFrames:
    """The agent's collector as an OpenMetrics registry collects it (`openmetrics_families`)."""

    def __init__(self, collector: FrameCollector) -> None:
        self._collector = collector

    def collect(self) -> Iterator[Metric]:
        return iter(openmetrics_families(list(self._collector.collect())))


class Exposition:
    """The agent's metrics, rendered for one scrape in the format its ``Accept`` header asks for.

    Prometheus asks for OpenMetrics first (``Accept: application/openmetrics-text;...``); a scrape
    without it gets the Prometheus text format (``text/plain; version=0.0.4``).
    """

    def __init__(self, collector: FrameCollector) -> None:
        from prometheus_client.registry import CollectorRegistry

        self._text = make_registry(collector)
        self._openmetrics: CollectorRegistry = CollectorRegistry(auto_describe=False)
        self._openmetrics.register(_OpenMetricsFrames(collector))

    def render(self, accept: str) -> tuple[bytes, str]:
        """The body and its content type for a scrape that sent ``accept`` (may be empty)."""
        from prometheus_client.exposition import choose_encoder

        encode, content_type = choose_encoder(accept)
        registry = self._openmetrics if content_type.startswith("application/openmetrics-text") else self._text
        return encode(registry), content_type
