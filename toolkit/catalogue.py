"""The catalogue of diagnostic codes: what JAX raises, its message, and the stage.

Built from the knowledge base's cards, the one place a code's facts live
(``toolkit/knowledge/cards/CODE.toml``: title, kind, stage, severity, lowering phase,
JAX's exception type and a pattern of its message, the short explanation, then the long
card; docs/ARCHITECTURE.md, "Errors are data"), checked against jax 0.12. ``classify``
maps a raw JAX exception (also wrapped in a ``JaxRuntimeError``) back to its code.

Parsing every card costs tens of milliseconds, so the facts read here are cached in a
JSON file under the user's cache folder, keyed by the cards' names, sizes and times
(any edit of a card is read again; where nothing can be written, the cards are parsed).
"""

from __future__ import annotations

import json
import os
import re
import zlib
from pathlib import Path
from typing import Any

from mpmd_lab.record import Record


class Entry(Record):
    """One code: ``type`` the exception JAX raises ("" for mpmd-lab's own findings),
    ``pattern`` a regex that finds the message in JAX's text, ``also`` the other stages
    JAX raises it at (``stage`` is the earliest), ``loose`` for an entry whose
    ``pattern`` is generic (``^...$``, type-checked): a specific message of the same
    code, searched anywhere whatever the exception type."""

    __slots__ = ("code", "type", "pattern", "stage", "title", "severity", "also", "loose")

    def __init__(
        self,
        code: str,
        type: str,
        pattern: str,
        stage: str,
        title: str,
        severity: str = "error",
        also: tuple[str, ...] = (),
        loose: str = "",
    ) -> None:
        self.code = code
        self.type = type
        self.pattern = pattern
        self.stage = stage
        self.title = title
        self.severity = severity
        self.also = also
        self.loose = loose


CARDS = Path(__file__).resolve().parent / "knowledge" / "cards"
#: what the catalogue reads of a card (the rest is the long explanation: ``knowledge``)
FACTS = (
    "code",
    "title",
    "kind",
    "stage",
    "severity",
    "also",
    "phase",
    "jax_type",
    "pattern",
    "loose",
    "explanation",
)


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    # one file per cards folder (each checkout its own)
    return Path(base) / "mpmd-lab" / f"catalogue-{zlib.crc32(str(CARDS).encode()):08x}.json"


def read_cards() -> list[dict[str, Any]]:
    """Every card's catalogue facts (``FACTS``), in code order: from the cache when the
    cards are the ones it was made from, else parsed (and the cache written)."""
    with os.scandir(CARDS) as found:
        files = sorted((e for e in found if e.name.endswith(".toml")), key=lambda e: e.name)
    stamp = [[e.name, st.st_size, st.st_mtime_ns] for e in files for st in [e.stat()]]
    cache = _cache_file()
    try:
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept["stamp"] == stamp:
            return list(kept["facts"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    import tomllib

    facts = []
    for e in files:
        card = tomllib.loads(Path(e.path).read_text(encoding="utf-8"))
        facts.append({k: card[k] for k in FACTS if k in card})
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "facts": facts}), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home: parsed again next time
    return facts


def _entry(card: dict[str, Any]) -> Entry:
    return Entry(
        card["code"],
        card.get("jax_type", ""),
        card.get("pattern", ""),
        card["stage"],
        card["title"],
        card.get("severity", "error"),
        tuple(card.get("also", ())),
        card.get("loose", ""),
    )


def _classify_order(e: Entry) -> tuple[bool, str]:
    """Specific messages are tried first (searched anywhere), then the generic ones
    (``^...$``: the whole message of an exception of the catalogued type)."""
    return e.pattern.startswith("^"), e.code


_CARDS = read_cards()

#: The codes JAX raises, in the order ``classify`` tries them.
ENTRIES: list[Entry] = sorted(
    (_entry(c) for c in _CARDS if c["kind"] == "jax"), key=_classify_order
)

BY_CODE: dict[str, Entry] = {e.code: e for e in ENTRIES}

#: Codes mpmd-lab reports that JAX itself never raises (or raises only on a GPU):
#: code -> (title, stage).
OWN: dict[str, tuple[str, str]] = {
    c["code"]: (c["title"], c["stage"]) for c in _CARDS if c["kind"] == "mpmd-lab"
}

#: Errors of a generated call that are mpmd-lab codes, not JAX's (tried after ENTRIES).
OWN_PATTERNS: list[Entry] = sorted(
    (_entry(c) for c in _CARDS if c["kind"] == "mpmd-lab" and c.get("pattern")),
    key=_classify_order,
)

#: mpmd-lab's own codes that are warnings, not errors.
OWN_WARNINGS = frozenset(
    c["code"] for c in _CARDS if c["kind"] == "mpmd-lab" and c.get("severity") == "warning"
)

#: The short explanation shown with a diagnostic (the card has the long one).
EXPLANATIONS: dict[str, str] = {c["code"]: c["explanation"] for c in _CARDS if "explanation" in c}

#: The phase of the Mosaic GPU lowering that raises a code (``layout_rules.lowering_phase``).
LOWERING_PHASE: dict[str, str] = {c["code"]: c["phase"] for c in _CARDS if "phase" in c}


_WRAPPER = re.compile(r"^(?:jax\.errors\.|jaxlib\.\S*\.)?JaxRuntimeError")
#: ``SomeError: message`` lines (also ``pkg.mod.SomeError: message``) in pasted text.
_EXC_LINE = re.compile(
    r"^\s*(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Warning))(?::[ \t]?(.*))?$", re.M
)
_TRACE_LINE = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|File \"|[\^~]+$|-{5,}$|For simplicity, JAX has"
    r"|The above exception|During handling of the above)"
)


_RACE_KIND = re.compile(r"^(Read/write|Write/write) race\b")


def title(code: str, message: str = "") -> str:
    """The one-line title of a code ("" when unknown); a race's says its kind, from its
    message ("A read/write race")."""
    if code.startswith("RACE") and (m := _RACE_KIND.match(message)):
        return f"A {m.group(1).lower()} race: unordered accesses to the same elements"
    entry = BY_CODE.get(code)
    if entry is not None:
        return entry.title
    own = OWN.get(code)
    return own[0] if own else ""


def exceptions_in(text: str) -> list[tuple[str, str]]:
    """Every ``(type, message)`` an exception text holds: a ``JaxRuntimeError``'s inner
    errors, the chained errors of a pasted traceback, each once, outermost first.

    A message runs from its ``Type: `` line to the next traceback line or blank line.
    """
    out: list[tuple[str, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _EXC_LINE.match(line)
        if not m:
            continue
        msg = [m.group(2) or ""]
        for nxt in lines[i + 1 :]:
            if not nxt.strip() or _TRACE_LINE.match(nxt) or _EXC_LINE.match(nxt):
                break
            msg.append(nxt)
        item = (m.group(1), "\n".join(msg).strip())
        if item not in out:
            out.append(item)
    return out


def unwrap(type_name: str, message: str) -> tuple[str, str]:
    """The innermost real error of a ``JaxRuntimeError`` (``INTERNAL: ... ValueError: msg``);
    other exceptions come back as they are."""
    if not (_WRAPPER.match(type_name) or type_name.endswith("JaxRuntimeError")):
        return type_name, message
    inner = [e for e in exceptions_in(message) if not e[0].endswith("JaxRuntimeError")]
    # the last one is the error that failed the callback (RuntimeError("Computation
    # failed ...") wraps it in some versions, so prefer a non-generic one)
    for t, m in reversed(inner):
        if not m.startswith("Computation failed on"):
            return t, m
    return inner[-1] if inner else (type_name, message)


def _short(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def classify(type_name: str, message: str) -> str | None:
    """The code of a raw JAX exception (type name and message), or None if unknown.

    Robust to a ``JaxRuntimeError`` around the real error, to a whole traceback as the
    message, and to ``module.Type`` names. Specific messages are searched anywhere in
    the text; generic ones (``tuple index out of range``, an empty message) must be
    the whole message of an exception of the catalogued type.
    """
    type_name = _short(type_name.strip())
    message = message or ""
    candidates = [(type_name, message.strip()), unwrap(type_name, message)]
    candidates += exceptions_in(message)
    for e in (*ENTRIES, *OWN_PATTERNS):
        if e.pattern.startswith("^"):
            rx = re.compile(e.pattern)
            for t, m in candidates:
                if _short(t) in (e.type, "") and rx.match(m.strip()) and (t or m):
                    return e.code
            if e.loose and any(
                re.search(e.loose, m) for m in (message, *(m for _, m in candidates))
            ):
                return e.code
            continue
        if any(re.search(e.pattern, m) for m in (message, *(m for _, m in candidates))):
            return e.code
    return None


_PREFIX = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception)):?(?:[ \t]|$)")


def classify_text(text: str) -> str | None:
    """The code in pasted text: ``ValueError: msg``, a whole traceback, a
    ``JaxRuntimeError`` dump, or just the message."""
    text = text.strip()
    m = _PREFIX.match(text)
    if m:
        return classify(m.group(1), text[m.end() :])
    found = exceptions_in(text)
    if found:
        t, _ = found[-1]
        return classify(t, text)
    return classify("", text)
