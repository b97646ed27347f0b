"""Journal: the agent's flight recorder, frames and events in SQLite (WAL) with min/mean/max tiers.

Layout of ``<state_dir>/journal.sqlite3``:

- ``frames``: each recent frame, one row per frame, indexed by ``taken_at``. Format 3: the rows
  of one ``stream`` (named by its first row's id) are one gzip member being written, each row what
  its frame's JSON line added up to a sync flush, so they decompress together from the first; the
  block's last frame finishes the member. Format 2's rows (``stream`` NULL) are each zlib-compressed
  against a preset dictionary (a recent frame, in ``dicts``). Every commit appends here, so a crash
  loses at most the last commit interval.
- ``blocks``: older frames in blocks of up to `BLOCK_FRAMES` frames of one run: one gzip member
  of JSON lines each, with the frames' ``taken_at`` alongside. A stream becomes a block as it was
  written (finished by `blocks.seal_stream` when its writer could not); format 2's rows are
  recompressed. Moving frames from ``frames`` to ``blocks`` is one transaction, and readers query
  both in one statement, so they see every frame exactly once. An export sends whole blocks as
  they are (gzip members concatenate into one gzip stream).
- ``events``: every event of every frame, as wire JSON.
- ``buckets``: per-series ``[min, mean, max, count]`` over 60 s and 900 s buckets; the
  60 s tier is computed from frames, the 900 s tier from the 60 s one, so nothing averages a
  sag away. Series are found generically (`rigmon.series`). The writer keeps them as it writes
  (`rollup.Rollup`); maintenance computes from the frames what they lack after a restart.
- ``runs``: one row per agent run; ``stopped_at`` is written at a clean stop, so a run
  without it was killed or lost power.
- ``meta``: format version, the tiers' watermarks and ``frames:expired_before`` (frames before
  it are past retention: hidden from readers at once, deleted with the last block holding them).

One `JournalStore` (one connection) belongs to the writer thread; readers open their own
read-only connection through `JournalReader` (`read_only.open_read_only`: also on a read-only
file system), which WAL lets run beside the writer.
"""

from rigmon.agent.journal.blocks import (
    BLOCK_AFTER_S,
    BLOCK_FLUSH_S,
    BLOCK_FRAMES,
    DICT_CACHE_ENTRIES,
    DICT_ROTATE_S,
    gzip_member,
)
from rigmon.agent.journal.layout import JournalError, journal_path
from rigmon.agent.journal.reader import JournalReader, encode_history
from rigmon.agent.journal.runs import UncleanRun, unclean_message
from rigmon.agent.journal.store import JournalStore
from rigmon.agent.journal.upkeep import Retention
from rigmon.agent.journal.tiers import TIERS_S
from rigmon.agent.journal.writer import JournalWriter

__all__ = [
    "BLOCK_AFTER_S",
    "BLOCK_FLUSH_S",
    "BLOCK_FRAMES",
    "DICT_CACHE_ENTRIES",
    "DICT_ROTATE_S",
    "TIERS_S",
    "JournalError",
    "JournalReader",
    "JournalStore",
    "JournalWriter",
    "Retention",
    "UncleanRun",
    "encode_history",
    "gzip_member",
    "journal_path",
    "unclean_message",
]
