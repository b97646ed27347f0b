"""An event rule's ``event`` and ``data`` checked against the events agents emit (`rigmon.schema.events`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rigmon.schema.events import EVENT_KINDS, JOURNAL_ONLY_KINDS, data_type, fits
from rigmon.typed import as_written


def check_event_rule(event: str, data: Mapping[str, Sequence[object]]) -> None:
    """Refuse an event rule that could never fire: a kind no agent emits, a ``data`` key its events never
    carry, a value of another type than the key's (``xid = ["79"]``: Xids are numbers; ``xid = [79.5]``: they
    are whole numbers), or an empty list.

    Raises:
        ValueError: naming the key (``event``, ``data.xid``) and what is known instead.
    """
    kind = EVENT_KINDS.get(event)
    if kind is None:
        raise ValueError(f"event: no event kind {event!r}{_close(event, EVENT_KINDS)} "
                         f"(known: {', '.join(sorted(EVENT_KINDS))})")
    if event in JOURNAL_ONLY_KINDS:
        raise ValueError(f"event: {event!r} events are written in the journal only (no frame carries them, so "
                         "no rule sees them): a rule on them would never fire")
    for key, allowed in data.items():
        if not allowed:
            # No value matches an empty list: the rule could never fire.
            raise ValueError(f"data.{key}: give at least one value (leave the key out to match any)")
        of = data_type(kind, key)
        if of is None and not kind:
            raise ValueError(f"data.{key}: {event!r} events carry no data (leave data out)")
        if of is None:
            raise ValueError(f"data.{key}: {event!r} events carry no {key!r}{_close(key, kind)} "
                             f"(they carry: {', '.join(sorted(kind))})")
        wrong = [value for value in allowed if not fits(value, of)]
        if wrong:
            raise ValueError(f"data.{key}: {event!r} events carry {key} as {_TYPE_TEXT[of]}, "
                             f"got {as_written(wrong[0])}: it would never match")


_TYPE_TEXT = {"int": "a whole number", "number": "a number", "text": "text", "bool": "true or false", "any": "any value"}


def _close(word: str, known: Mapping[str, object]) -> str:
    # Deferred: difflib is needed only to explain a refused rule, never on an agent's start.
    import difflib

    near = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    if not near and "_" in word:
        near = [k for k in known if word in k or k in word][:1]
    return f"; did you mean {near[0]!r}?" if near else ""
