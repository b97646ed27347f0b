"""Bug-report bundles read back (what a replay plays): the manifest, the report and each node's files,
checked; a bundle cut short or damaged gives what it holds, a hostile or newer one is refused."""

from __future__ import annotations

import json
import math
import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rigmon import __version__
from rigmon.cluster.sanitise import clean_text
from rigmon.schema import SCHEMA_VERSION, Event, Frame, History, Info, decode, decode_data
from rigmon.snapshot.gpus_gone import GoneGpu, gone_gpu_of_data
from rigmon.snapshot.unpack_limits import UNPACK_RATIO, TooLarge, gunzip_bounded, unpack_budget

#: Formats `read_bundle` reads.
READABLE_FORMATS = (1, 2)


class BundleError(ValueError):
    """A file is not a readable rigmon bundle."""


@dataclass
class NodeBundle:
    """One node's part of a bundle, read back."""

    node: str
    info: Info | None
    config: Any
    inventory: Any
    history: History | None
    events: list[Event]
    frames: list[Frame]
    files: dict[str, str]
    #: Why its frames are not here although the manifest lists them (a bundle cut short before them), or
    #: why none of them is read (its frames file is damaged: the line names the file and the node).
    missing: str | None = None
    #: `NodePart.pulled_at` and `NodePart.agent_now_at` as the manifest has them (``None`` in a bundle
    #: of an older rigmon, or where the manifest's value is not a number).
    pulled_at: float | None = None
    agent_now_at: float | None = None
    #: The GPUs the node had within its journal's span and lacks now (its inventory.json's ``gpus_gone``;
    #: empty in a bundle of an older rigmon): what to read first of a node whose GPU fell off the bus.
    gpus_gone: tuple[GoneGpu, ...] = ()


@dataclass
class Bundle:
    """A bundle read back: its manifest, report and nodes (in manifest order).

    ``cut_short`` says where a bundle that ends early (an interrupted download or copy) stopped:
    what came before is read (the manifest comes first, then each node's files in turn).
    """

    manifest: dict[str, Any]
    report: str
    nodes: list[NodeBundle]
    members: dict[str, bytes]
    cut_short: str | None = None


def read_bundle(path: str | Path) -> Bundle:
    """Read a bundle written by `write_bundle` (what a replay does).

    Raises:
        BundleError: not a tar.gz of this format, or one whose manifest, info, config, inventory,
            series or events are damaged (the message names the file of the bundle that is), or that
            unpacks past any bundle rigmon writes. A node whose frames file is damaged is read
            without its frames (`NodeBundle.missing` says so).
    """
    members: dict[str, bytes] = {}
    cut_short: str | None = None
    if os.path.isdir(path):
        # Often the bundle unpacked to read REPORT.md: the replay reads the file itself.
        raise BundleError(f"{path}: a directory, not a bundle: give the .tar.gz file rigmon snapshot "
                          "(or the dashboard's export) wrote, not a directory it was unpacked into")
    try:
        budget = unpack_budget(os.path.getsize(path))
    except OSError as exc:
        raise BundleError(f"{path}: not a readable bundle: {exc.strerror or exc}") from None
    try:
        # Member by member, as written: a bundle cut short still gives the members before the cut.
        with tarfile.open(path, "r:gz") as tar:
            for m in tar:
                if not m.isfile():
                    continue
                budget -= m.size  # as its header says, before a byte of it is read
                if budget < 0:
                    raise BundleError(f"{path}: {m.name}: the bundle unpacks to more than {UNPACK_RATIO}x its "
                                      "size: not a bundle rigmon writes (refused before it takes the memory)")
                fh = tar.extractfile(m)
                if fh is not None:
                    members[m.name.split("/", 1)[1] if "/" in m.name else m.name] = fh.read()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        if "manifest.json" not in members:
            if isinstance(exc, EOFError):
                # The manifest comes first: a bundle cut before its end has nothing to play.
                raise BundleError(f"{path}: not a readable bundle: it is cut short before its manifest.json "
                                  f"(an interrupted download or copy?): {exc}") from None
            raise BundleError(f"{path}: not a readable bundle: {exc}") from None
        last = next(reversed(members))
        # A gzip stream that ends early is a cut (an interrupted download); one whose bytes fail their
        # check is damaged, and the files read just before the damage may hold its bad bytes.
        cut_short = f"{'the bundle is cut short' if isinstance(exc, EOFError) else _DAMAGED} after {last} ({exc})"
    if "manifest.json" not in members:
        raise BundleError(f"{path}: no manifest.json")
    try:
        man = _manifest(members["manifest.json"], path)
        nodes = [_node(entry, members, cut_short) for entry in man["nodes"]]
    except _MemberError as exc:
        damage = f" ({cut_short})" if cut_short is not None and cut_short.startswith(_DAMAGED) else ""
        raise BundleError(f"{path}: a damaged bundle{damage}: {exc}") from None
    return Bundle(manifest=man, report=members.get("REPORT.md", b"").decode("utf-8", "replace"), nodes=nodes,
                  members=members, cut_short=cut_short)


#: How `Bundle.cut_short` begins for a bundle whose bytes fail their check (not one that ends early).
_DAMAGED = "the bundle is damaged"


class _MemberError(ValueError):
    """A file of the bundle does not hold what rigmon writes there; the message names it."""


def _manifest(raw: bytes, path: str | Path) -> dict[str, Any]:
    """The manifest, checked for the shape the nodes are read by.

    Raises:
        BundleError: of a format this rigmon does not read (a newer rigmon's).
        _MemberError: not a manifest.
    """
    try:
        man = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _MemberError(f"manifest.json: not JSON: {exc}") from None
    if not isinstance(man, dict):
        raise _MemberError("manifest.json: not a JSON object")
    if man.get("format") not in READABLE_FORMATS:
        made_by = man.get("created_by")
        by = f" (made by {clean_text(str(made_by))})" if made_by else ""
        raise BundleError(f"{path}: bundle format {man.get('format')!r}{by}; rigmon {__version__} reads formats "
                          f"{', '.join(map(str, READABLE_FORMATS))}: open it with a newer rigmon")
    entries = man.get("nodes")
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("node"), str) and isinstance(e.get("dir"), str) for e in entries):
        raise _MemberError("manifest.json: nodes: expected a list of entries, each with a node and a dir")
    return man


def _node(entry: dict[str, Any], members: dict[str, bytes], cut_short: str | None) -> NodeBundle:
    """One node's part of the bundle, as its manifest entry lists it.

    Raises:
        _MemberError: one of its files is damaged.
    """
    base = entry["dir"] + "/"

    def member(name: str, default: bytes) -> tuple[str, bytes]:
        return base + name, members.get(base + name, default)

    try:
        name, raw = member("info.json", b"null")
        info_data = json.loads(raw)
        info = decode_data(Info, info_data) if info_data else None
        name, raw = member("config.json", b"null")
        config = json.loads(raw)
        name, raw = member("inventory.json", b"null")
        inventory_data = json.loads(raw)
        name, series = member("series.json", b"")
        history = decode(History, series) if series else None
        name, raw = member("events.jsonl", b"")
        events = [decode(Event, line) for line in raw.splitlines() if line]
    except (ValueError, UnicodeDecodeError, TypeError) as exc:
        # JSON and schema errors are ValueErrors.
        raise _MemberError(f"{name}: {exc}") from None
    frames, damaged = _frames(members, base, entry["node"])
    return NodeBundle(
        node=entry["node"],
        info=info,
        config=config,
        inventory=inventory_data,
        history=history,
        events=events,
        frames=frames,
        files={k[len(base) + len("captures/"):]: v.decode("utf-8", "replace")
               for k, v in members.items() if k.startswith(base + "captures/")},
        missing=damaged if damaged is not None
        else None if cut_short is None or _has_frames(members, base) or not entry.get("frames")
        else f"the bundle is {'damaged' if cut_short.startswith(_DAMAGED) else 'cut short'} before its frames",
        pulled_at=_time_of(entry, "pulled_at"),
        agent_now_at=_time_of(entry, "agent_now_at"),
        gpus_gone=_gpus_gone(inventory_data),
    )


def _gpus_gone(inventory_data: Any) -> tuple[GoneGpu, ...]:
    """The inventory's ``gpus_gone``; an entry that is not one is left out (its text is the bundle's, not ours)."""
    listed = inventory_data.get("gpus_gone") if isinstance(inventory_data, dict) else None
    gone = (gone_gpu_of_data(item) for item in listed) if isinstance(listed, list) else ()
    return tuple(g for g in gone if g is not None)


def _time_of(entry: dict[str, Any], key: str) -> float | None:
    """The manifest entry's Unix time ``key``: ``None`` when absent (an older bundle) or not a finite number."""
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _has_frames(members: dict[str, bytes], base: str) -> bool:
    return base + "frames.jsonl.gz" in members or base + "frames.jsonl" in members


def _frame_lines(members: dict[str, bytes], base: str) -> list[bytes]:
    """The node's frame lines (format 2 gzip, format 1 plain).

    Raises:
        TooLarge: its frames.jsonl.gz unpacks past any bundle rigmon writes.
        zlib.error, EOFError, OSError: its frames.jsonl.gz does not decompress.
    """
    packed = members.get(base + "frames.jsonl.gz")
    if packed is not None:
        return gunzip_bounded(packed).splitlines() if packed else []
    return members.get(base + "frames.jsonl", b"").splitlines()


def _frames(members: dict[str, bytes], base: str, node: str) -> tuple[list[Frame], str | None]:
    """The node's frames; or none, and one line saying its frames file is damaged (naming the file and
    the node), when it does not decompress or holds a line that is not a frame: the rest of the bundle
    (the report, the node's events, the other nodes' frames) still reads.

    Raises:
        _MemberError: frames that unpack past any bundle rigmon writes (a decompression bomb), or of
            another schema version (a newer rigmon's): the bundle is refused, as a hostile or newer one.
    """
    name = base + ("frames.jsonl.gz" if base + "frames.jsonl.gz" in members else "frames.jsonl")
    try:
        lines = _frame_lines(members, base)
    except TooLarge as exc:
        raise _MemberError(f"{name}: does not decompress: {exc}") from None
    except (OSError, EOFError, zlib.error) as exc:
        return [], _damaged_frames(name, node, f"does not decompress: {exc}")
    frames: list[Frame] = []
    for number, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            frames.append(decode(Frame, line))
        except (ValueError, UnicodeDecodeError, TypeError) as exc:
            if _of_another_schema(line):
                raise _MemberError(f"{name}: {exc}") from None
            return [], _damaged_frames(name, node, f"line {number}: {exc}")
    return frames, None


def _damaged_frames(name: str, node: str, why: str) -> str:
    # The node's name and the reason (a quoted bit of the line) come from the file: text, never control.
    return clean_text(f"the frames of node {node} are damaged ({name}: {why}): none of them is read")


def _of_another_schema(line: bytes) -> bool:
    """Whether a frame line that does not decode says it is of another schema version than this rigmon's."""
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(data, dict) and "schema" in data and data["schema"] != SCHEMA_VERSION
