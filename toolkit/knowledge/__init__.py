"""The error knowledge base: one explanatory card per diagnostic code.

Cards are data, one TOML file per code under ``cards/`` (``cards/MPMD_DUP_REF.toml``),
in the spirit of ``rustc --explain``: the exact message and the JAX versions, what it
means, when it happens, how to fix it, a before/after example, how to prevent it, and
related codes. Each card with a trigger has an example scenario under ``examples/``
(``<CODE>.json``, and ``<CODE>.fixed.json`` where a fix exists) that the tests run
through real JAX. ``recorded.json`` holds what JAX actually printed for each example,
per JAX version.

    >>> from mpmd_lab import knowledge
    >>> print(knowledge.lookup("mpmd_dup_ref").render())
    >>> knowledge.lookup("ValueError: Out of bound slice: start=200, size=100").code
    'AT_OOB_SLICE'
"""

from __future__ import annotations

import functools
import html
import json
import os
import textwrap
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mpmd_lab import catalogue

HERE = Path(__file__).resolve().parent
CARDS = HERE / "cards"
EXAMPLES = HERE / "examples"
RECORDED = HERE / "recorded.json"

#: JAX versions the cards were checked against (the GPU machine runs 0.11.2).
VERSIONS = ("0.11.2", "0.12.0.1")

#: Fields every card file must give (non-empty).
REQUIRED = (
    "code",
    "title",
    "kind",
    "stage",
    "message",
    "versions",
    "meaning",
    "trigger",
    "situations",
    "solutions",
    "before",
    "after",
    "prevention",
    "related",
)
#: ... and optional ones: the rest of the catalogue's facts, then the card's own.
OPTIONAL = (
    *(k for k in catalogue.FACTS if k not in REQUIRED),
    "version_notes",
    "example_stage",
    "example_jax",
    "fix_note",
)


@dataclass(frozen=True)
class Example:
    """A card's example scenario pair and what real JAX does with them.

    ``jax``: the code JAX's error classifies to at ``stage``, or ``"accepted"`` when
    JAX runs it without a word (mpmd-lab's own findings).
    """

    scenario: str  # path relative to the repository root
    fixed: str | None
    stage: str
    jax: str


@dataclass(frozen=True)
class Card:
    """The long explanation of one diagnostic code."""

    code: str
    title: str
    kind: str  # "jax" (JAX raises it) or "mpmd-lab" (mpmd-lab's own finding)
    type: str  # the exception JAX raises ("" for mpmd-lab's own codes)
    stage: str
    severity: str
    message: str
    versions: list[str]
    meaning: str
    trigger: str
    situations: list[str]
    solutions: list[str]
    before: str
    after: str
    prevention: str
    related: list[str]
    version_notes: str = ""
    fix_note: str = ""
    example: Example | None = None
    recorded: dict[str, Any] = field(default_factory=dict)

    def checked(self) -> list[str]:
        """One line per JAX version the example was run with: what JAX did."""
        out = []
        for version, r in sorted(self.recorded.items()):
            if r is None:
                out.append(f"jax {version}: runs the example without an error")
                continue
            wrapped = f" (inside {r['wrapped_in']})" if r.get("wrapped_in") else ""
            first = r["message"].strip().splitlines()[0] if r["message"].strip() else ""
            if len(first) > 120:
                first = first[:117] + "..."
            said = f": {first}" if first else " (no message)"
            out.append(f"jax {version}: {r['type']}{wrapped} at {r['stage']}{said}")
        return out

    def where(self) -> str:
        """Who reports it, and at which stage (a GPU race raises nothing at all)."""
        if self.kind == "jax":
            return f"raised by JAX at stage {self.stage}"
        if self.stage == "gpu-run":
            return "found by mpmd-lab's check (on a GPU nothing is raised: the result is wrong)"
        if self.stage == "gpu-lower":  # (JAX's lowering fails: a crash, or errors by case)
            return (
                "reported by mpmd-lab at stage gpu-lower (JAX's lowering fails there with no "
                "one error to match)"
            )
        return f"reported by mpmd-lab (JAX is silent) at stage {self.stage}"

    # ---------------------------------------------------------------- renderings

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON data."""
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        """The card as JSON text (``mpmd-lab explain CODE --json``)."""
        return json.dumps(self.to_dict(), indent=indent)

    def render(self, width: int = 88) -> str:
        """The card as terminal text."""
        head = f"{self.code}: {self.title}"
        lines = [head, "=" * min(len(head), width)]
        facts = [self.severity, self.where()]
        if self.type:
            facts.append(self.type)
        lines.append(" · ".join(facts))
        lines.append("JAX " + ", ".join(self.versions))
        lines += ["", *_indent_block(self.message, "    ")]

        def section(title: str, body: str | list[str], numbered: bool = False) -> None:
            if not body:
                return
            lines.extend(["", title])
            if isinstance(body, str):
                lines.extend(_wrap(body, width, "  "))
                return
            for i, item in enumerate(body, 1):
                bullet = f"{i}. " if numbered else "- "
                lines.extend(_wrap(item, width, "  " + bullet, "  " + " " * len(bullet)))

        section("What it means", self.meaning)
        section("When it happens", self.trigger)
        section("Common situations", self.situations)
        section("How to fix it", self.solutions, numbered=True)
        lines += ["", "Example", "  Before:"]
        lines += _indent_block(self.before, "      ")
        lines += ["  After:"]
        lines += _indent_block(self.after, "      ")
        if self.fix_note:
            lines.extend(_wrap(self.fix_note, width, "  "))
        section("How to prevent it", self.prevention)
        section(
            "JAX versions", [*self.checked(), *([self.version_notes] if self.version_notes else [])]
        )
        if self.related:
            lines += ["", "Related: " + ", ".join(self.related)]
        if self.example:
            cmd = "run {}" if self.example.stage == "interpret" else "check {} --deep"
            lines += ["", "Try it:", "  mpmd-lab " + cmd.format(_from_here(self.example.scenario))]
            if self.example.fixed:
                lines.append("  mpmd-lab " + cmd.format(_from_here(self.example.fixed)))
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        """The card as an HTML fragment (for the widgets); every value is escaped."""
        e = html.escape

        def para(text: str) -> str:
            return "".join(f"<p>{e(p)}</p>" for p in text.split("\n\n") if p.strip())

        def items(xs: list[str], tag: str = "ul") -> str:
            return f"<{tag}>" + "".join(f"<li>{e(x)}</li>" for x in xs) + f"</{tag}>"

        def pre(code: str) -> str:
            return f"<pre><code>{e(code.rstrip())}</code></pre>"

        meta = " · ".join(
            x
            for x in (
                self.severity,
                self.where(),
                self.type,
                "JAX " + ", ".join(self.versions),
            )
            if x
        )
        parts = [
            f'<div class="mpmd-card" data-code="{e(self.code)}">',
            f"<h3><code>{e(self.code)}</code> {e(self.title)}</h3>",
            f'<p class="mpmd-card-meta">{e(meta)}</p>',
            pre(self.message),
            "<h4>What it means</h4>",
            para(self.meaning),
            "<h4>When it happens</h4>",
            para(self.trigger),
            items(self.situations),
            "<h4>How to fix it</h4>",
            items(self.solutions, "ol"),
            "<h4>Example</h4><p>Before:</p>",
            pre(self.before),
            "<p>After:</p>",
            pre(self.after),
        ]
        if self.fix_note:
            parts.append(para(self.fix_note))
        parts += ["<h4>How to prevent it</h4>", para(self.prevention)]
        if self.version_notes or self.recorded:
            parts += ["<h4>JAX versions</h4>", items(self.checked()), para(self.version_notes)]
        if self.related:
            rel = ", ".join(f"<code>{e(r)}</code>" for r in self.related)
            parts.append(f"<p>Related: {rel}</p>")
        parts.append("</div>")
        return "".join(parts)

    def _repr_html_(self) -> str:
        return self.to_html()


def _wrap(text: str, width: int, first: str, rest: str | None = None) -> list[str]:
    out: list[str] = []
    for i, para in enumerate(p for p in text.strip().split("\n\n") if p.strip()):
        if i:
            out.append("")
        lead = first if i == 0 else (rest if rest is not None else first)
        out.extend(
            textwrap.wrap(
                " ".join(para.split()),
                width,
                initial_indent=lead,
                subsequent_indent=rest if rest is not None else first,
                break_on_hyphens=False,
                break_long_words=False,
            )
        )
    return out


def _from_here(path: str) -> str:
    """A path relative to the repository root as the working directory reaches it: as
    it is from the root or under it, else absolute (the card's command then works from
    notebooks/ or any other folder)."""
    full = HERE.parents[1] / path
    rel = os.path.relpath(full)
    return str(full) if rel.startswith("..") else rel


def _indent_block(text: str, prefix: str) -> list[str]:
    return [prefix + line if line.strip() else "" for line in text.rstrip().splitlines()]


# -------------------------------------------------------------------- loading


class CardError(ValueError):
    """A card file is incomplete or names an unknown code."""


def _example(code: str, data: dict[str, Any], stage: str, kind: str) -> Example | None:
    before = EXAMPLES / f"{code}.json"
    if not before.exists():
        return None
    fixed = EXAMPLES / f"{code}.fixed.json"
    root = HERE.parents[1]
    return Example(
        scenario=str(before.relative_to(root)),
        fixed=str(fixed.relative_to(root)) if fixed.exists() else None,
        stage=data.get("example_stage", stage),
        jax=data.get("example_jax", code if kind == "jax" else "accepted"),
    )


def load_card(path: Path) -> Card:
    """One card file, checked for completeness."""
    data = tomllib.loads(path.read_text())
    missing = [k for k in REQUIRED if not data.get(k)]
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise CardError(f"{path.name}: missing {missing}, unknown {unknown}")
    code = data["code"]
    if path.stem != code:
        raise CardError(f"{path.name}: holds code {code}")
    if data["kind"] not in ("jax", "mpmd-lab"):
        raise CardError(f"{path.name}: kind {data['kind']!r} is not 'jax' or 'mpmd-lab'")
    kind, stage = data["kind"], data["stage"]
    return Card(
        code=code,
        title=data["title"],
        kind=kind,
        type=data.get("jax_type", ""),
        stage=stage,
        severity=data.get("severity", "error"),
        message=data["message"].strip(),
        versions=list(data["versions"]),
        meaning=data["meaning"].strip(),
        trigger=data["trigger"].strip(),
        situations=list(data["situations"]),
        solutions=list(data["solutions"]),
        before=textwrap.dedent(data["before"]).strip("\n"),
        after=textwrap.dedent(data["after"]).strip("\n"),
        prevention=data["prevention"].strip(),
        related=list(data["related"]),
        version_notes=data.get("version_notes", "").strip(),
        fix_note=data.get("fix_note", "").strip(),
        example=_example(code, data, stage, kind),
        recorded=_recorded().get(code, {}),
    )


@functools.cache
def _recorded() -> dict[str, Any]:
    return json.loads(RECORDED.read_text()) if RECORDED.exists() else {}


@functools.cache
def _all() -> dict[str, Card]:
    cards = {}
    for path in sorted(CARDS.glob("*.toml")):
        c = load_card(path)
        cards[c.code] = c
    return cards


# ------------------------------------------------------------------------ API


def codes() -> list[str]:
    """Every code that has a card, sorted."""
    return sorted(_all())


def card(code: str) -> Card:
    """The card of a code (exact spelling); KeyError if none."""
    return _all()[code]


def lookup(query: str) -> Card | None:
    """The card for a code (any case, ``-`` or ``_``) or for a raw JAX message: bare,
    with its ``ValueError:`` prefix, a whole traceback, or inside a ``JaxRuntimeError``."""
    q = query.strip()
    if not q:
        return None
    key = q.upper().replace("-", "_")
    cards = _all()
    if key in cards:
        return cards[key]
    code = catalogue.classify_text(q)
    if code:
        return cards.get(code)
    # words of a message (any case, a part of it): the one card whose message holds them
    held = [c for c in cards.values() if _holds(c, q)]
    return held[0] if len(held) == 1 else None


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("`", "").split())


def _holds(c: Card, query: str) -> bool:
    q = _norm(query)
    return bool(q) and (q in _norm(c.message) or q in _norm(c.title))


def search(query: str, n: int = 5) -> list[Card]:
    """The cards a free-form query is most likely about, best first: those whose message
    or title holds its words (any case), else the codes spelt nearly like it, else the
    cards that share the most words with it."""
    import difflib

    q = _norm(query)
    if not q:
        return []
    cards = _all()
    held = [c for c in cards.values() if _holds(c, q)]
    if held:
        return sorted(held, key=lambda c: (q not in _norm(c.message), len(c.message)))[:n]
    key = query.strip().upper().replace("-", "_")
    near = difflib.get_close_matches(key, list(cards), n=n, cutoff=0.6)
    if near:
        return [cards[x] for x in near]
    words = set(q.split()) - {"a", "an", "the", "of", "to", "in", "is", "not", "and", "or"}
    if not words:
        return []
    scored = []
    for c in cards.values():
        text = set(_norm(f"{c.title} {c.message}").split())
        common = len(words & text)
        if common:
            scored.append((-common / len(words), c.code))
    scored.sort()
    return [cards[code] for score, code in scored[:n] if -score >= 0.5]


__all__ = ["Card", "CardError", "Example", "card", "codes", "load_card", "lookup", "search"]
