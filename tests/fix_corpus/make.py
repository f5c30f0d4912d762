"""Write the mutation cases of the fix corpus: newcomer mistakes made to the gallery's
collectives (a wait or signal left out, the output's dtype or size wrong, a ring index
not wrapped). ``python tests/fix_corpus/make.py`` rewrites them; only the ones the check
finds invalid are kept. The other files here were written by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mpmd_lab import gallery
from mpmd_lab.scenario import Scenario
from mpmd_lab.validate import check, first_error

HERE = Path(__file__).parent
GALLERY = [
    "ring-shift",
    "ring-all-gather",
    "ring-reduce-scatter",
    "exchange-shards",
    "collective-matmul",
    "cluster-exchange",
    "two-block-copy",
    "multicast-2d",
]


def _drop(op: str) -> Callable[[dict[str, Any]], None]:
    def run(d: dict[str, Any]) -> None:
        def rm(body: list[dict[str, Any]]) -> None:
            body[:] = [st for st in body if st.get("op") != op]
            for st in body:
                rm(st.get("body") or [])

        for p in d["call"]["programs"]:
            rm(p["body"])

    return run


def _dtype(d: dict[str, Any]) -> None:
    for o in d["call"]["outputs"].values():
        o["dtype"] = "int32" if o["dtype"] != "int32" else "float32"


def _half(d: dict[str, Any]) -> None:
    for o in d["call"]["outputs"].values():
        o["shape"][0] //= 2


def _no_mod(d: dict[str, Any]) -> None:
    def walk(x: Any) -> None:
        if isinstance(x, dict):
            v = x.get("device")
            if isinstance(v, str) and "% axis_size(dev)" in v:
                x["device"] = v.replace(") % axis_size(dev)", ")").replace(" % axis_size(dev)", "")
            for y in x.values():
                walk(y)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(d)


MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "no-wait": (_drop("semaphore_wait"), "every semaphore wait left out"),
    "no-signal": (_drop("semaphore_signal"), "every semaphore signal left out"),
    "out-dtype": (_dtype, "the output declared with the other dtype"),
    "out-half": (_half, "the output declared half as long"),
    "no-mod": (_no_mod, "the neighbour's device index not wrapped with % axis_size(dev)"),
}


def main() -> None:
    for g in GALLERY:
        for tag, (fn, what) in MUTATIONS.items():
            d = gallery.load(g).to_dict()
            fn(d)
            d["name"] = f"{g}-{tag}"
            d["description"] = f"{g} with a mistake: {what}."
            path = HERE / f"{g}-{tag}.json"
            if first_error(check(Scenario.model_validate(d))) is None:
                path.unlink(missing_ok=True)
                continue
            path.write_text(json.dumps(d, indent=2) + "\n")


if __name__ == "__main__":
    main()
