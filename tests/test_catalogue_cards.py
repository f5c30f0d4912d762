"""The catalogue is built from the cards, the one place a code's facts live, through a
cache that an edit of a card makes stale."""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from mpmd_lab import catalogue, knowledge


@pytest.fixture
def cards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the cards, and a cache folder of this test's own."""
    folder = tmp_path / "cards"
    shutil.copytree(catalogue.CARDS, folder)
    monkeypatch.setattr(catalogue, "CARDS", folder)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return folder


def test_the_facts_are_the_cards(cards: Path) -> None:
    facts = catalogue.read_cards()
    assert [f["code"] for f in facts] == sorted(p.stem for p in cards.glob("*.toml"))
    for f in facts:
        card = tomllib.loads((cards / f"{f['code']}.toml").read_text(encoding="utf-8"))
        assert f == {k: card[k] for k in catalogue.FACTS if k in card}


def test_the_cache_is_read_and_an_edited_card_is_read_again(cards: Path) -> None:
    first = catalogue.read_cards()
    cache = catalogue._cache_file()
    kept = json.loads(cache.read_text(encoding="utf-8"))
    assert kept["facts"] == first
    # the cache answers while the cards are unchanged: a title changed in it is what comes back
    kept["facts"][0]["title"] = "from the cache"
    cache.write_text(json.dumps(kept), encoding="utf-8")
    assert catalogue.read_cards()[0]["title"] == "from the cache"
    # an edit of a card (its size and time change) is read from the card
    card = cards / f"{first[0]['code']}.toml"
    text = card.read_text(encoding="utf-8")
    card.write_text(text.replace(f'title = "{first[0]["title"]}"', 'title = "edited"'))
    os.utime(card, ns=(card.stat().st_atime_ns, card.stat().st_mtime_ns + 1_000_000_000))
    assert catalogue.read_cards()[0]["title"] == "edited"


def test_an_unwritable_cache_still_gives_the_cards(
    cards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert [f["code"] for f in catalogue.read_cards()] == sorted(
        p.stem for p in cards.glob("*.toml")
    )


def test_every_card_says_what_the_catalogue_needs() -> None:
    for f in catalogue.read_cards():
        assert f["kind"] in ("jax", "mpmd-lab"), f["code"]
        assert f["title"] and f["stage"], f["code"]
        if f["kind"] == "jax":
            assert f.get("jax_type") and f.get("pattern"), f["code"]
        for key in ("pattern", "loose"):
            if f.get(key):
                re.compile(f[key])
        assert f.get("severity", "error") in ("error", "warning", "info"), f["code"]
    # the knowledge base's card and the catalogue's entry are the same facts
    for code in knowledge.codes():
        c = knowledge.card(code)
        e = catalogue.BY_CODE.get(code)
        if e is not None:
            assert (c.kind, c.type, c.stage, c.severity, c.title) == (
                "jax",
                e.type,
                e.stage,
                e.severity,
                e.title,
            )
        else:
            assert c.kind == "mpmd-lab" and (c.title, c.stage) == catalogue.OWN[code]


def test_classify_tries_specific_messages_before_generic_ones() -> None:
    generic = [e.pattern.startswith("^") for e in catalogue.ENTRIES]
    assert generic == sorted(generic)
    assert catalogue.classify("IndexError", "tuple index out of range") == "TRANSPOSE_BAD_AXIS"
