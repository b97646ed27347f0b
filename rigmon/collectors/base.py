"""The collector seam: protocol, errors, and the context every collector is built from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from rigmon.clock import Clock
from rigmon.config import AgentConfig
from rigmon.hw.root import HostRoot

#: Called by a collector's own thread with records that must not wait for the next tick
#: (an ADC window, an Xid event, a udev change). Records are schema records or events.
PushFn = Callable[[Sequence[object]], None]


class NoData(Exception):
    """The hardware this collector reads is not present (no NVIDIA driver, no md arrays).

    Not an error: the collector's state becomes ``absent``.
    """


class CollectorStarting(Exception):
    """The hardware is there but not ready to be read yet (a slow first nvmlInit while the
    driver brings the GPUs up); the message says what it waits for.

    Neither a failure nor an absence: the collector's state becomes ``pending`` (not yet
    known) with the message, until a call returns readings, raises `NoData` or fails.
    """


class CollectorError(Exception):
    """A real failure reading present hardware; the message is shown to the operator.

    Args:
        message: what failed.
        records: what the collector reads nonetheless: records that say the hardware is gone,
            with its counters as they stand (the rail ADC's reading while its port is unplugged,
            ``connected`` false). The frame carries them; the collector's state is ``error`` all the same.
    """

    def __init__(self, message: str = "", records: Sequence[object] = ()) -> None:
        super().__init__(message)
        self.records: tuple[object, ...] = tuple(records)


class CollectorHung(CollectorError):
    """The hardware did not answer within the collector's own watchdog (an NVML call stuck
    in the driver); the collector's state becomes ``hung`` until it answers again."""


class Collector(Protocol):
    """One source of readings."""

    name: str

    def collect(self) -> Sequence[object]:
        """Read the source once and return schema records (and `schema.Event`-shaped drafts).

        Raises:
            NoData: the hardware is absent.
            CollectorStarting: present, not ready to be read yet.
            CollectorError: present but unreadable.
        """
        ...

    def start(self, push: PushFn) -> None:
        """Start background readers (pushed sources); a polled collector does nothing."""
        ...

    def close(self) -> None:
        """Stop background readers and release devices."""
        ...


@dataclass(frozen=True, slots=True)
class CollectorContext:
    """Everything a collector may depend on, passed to its factory."""

    root: HostRoot
    clock: Clock
    config: AgentConfig
    probe_key: bytes | None = None
    """The cluster's latency probe key (from ``[probes] key_file`` or the read token), if any."""


@dataclass(frozen=True, slots=True)
class EventDraft:
    """An event as a collector reports it; the agent gives it an id and a time.

    Attributes:
        kind: what happened (``collector_failed``, ``gpu_lost``, ``link_speed_changed``...).
        severity: ``info``, ``warning`` or ``critical``.
        subject: the thing concerned (``gpu:3``, ``link:0-1``).
        message: one line for humans.
        data: scalar details.
        at: Unix seconds when it happened, if the source says (kernel log); else now.
    """

    kind: str
    severity: str
    subject: str
    message: str
    data: dict[str, str | int | float | bool | None] | None = None
    at: float | None = None


class PolledCollector:
    """Base for collectors with no background reader: start and close do nothing."""

    name = "polled"

    def start(self, push: PushFn) -> None:
        """Polled collectors have nothing to start."""

    def close(self) -> None:
        """Polled collectors hold nothing open."""


def status_note(collector: object) -> str | None:
    """What a collector whose call succeeded says in its status beside ``ok``: a part of it that does
    not work while its readings are fine (the GPU collector's NVML Xid events). A collector may define
    ``status_note(self) -> str | None``; ``None`` when it does not or has nothing to say."""
    note = getattr(collector, "status_note", None)
    if not callable(note):
        return None
    said = note()
    return said if isinstance(said, str) else None


CollectorFactory = Callable[[CollectorContext], Collector]
