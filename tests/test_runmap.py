"""RunMap (the shadow memory's segments) against a value per element."""

import random

from mpmd_lab.engine.shadow import RunMap


def _segments(m: RunMap) -> list[int]:
    out: list[int] = []
    assert m.bounds[-1] == m.size  # (every segment's end at hand)
    for k, v in enumerate(m.vals):
        out += [v] * (m.bounds[k + 1] - m.bounds[k])
    return out


def test_assign_and_query_match_a_value_per_element() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        size = rng.randint(1, 40)
        m, ref = RunMap(size), [-1] * size
        for _ in range(rng.randint(1, 30)):
            if rng.random() < 0.3 and len(m.vals) > 1:  # an existing segment again
                k = rng.randrange(len(m.vals))
                spans = [(m.bounds[k], m.bounds[k + 1])]
            else:
                spans, pos = [], 0
                while pos < size and rng.random() < 0.7:
                    a = rng.randint(pos, size - 1)
                    b = rng.randint(a + 1, size)
                    spans.append((a, b))
                    pos = b + rng.randint(0, 2)
            value = rng.choice([-1, rng.randint(0, 5)])
            m.assign(spans, value)
            for a, b in spans:
                ref[a:b] = [value] * (b - a)
            assert _segments(m) == ref
            assert m.empty == all(v < 0 for v in ref)  # (kept by assign, not recomputed)
            # canonical: no two neighbouring segments hold the same value
            assert all(x != y for x, y in zip(m.vals, m.vals[1:], strict=False))
            a = rng.randrange(size)
            b = rng.randint(a + 1, size)
            want = [(e, e + 1, ref[e]) for e in range(a, b) if ref[e] >= 0]
            got = [(e, e + 1, v) for lo, hi, v in m.query([(a, b)]) for e in range(lo, hi)]
            assert got == want
