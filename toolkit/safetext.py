"""Text that is safe to show: user input cut to a sane length, control characters
made visible, and output streams that never fail on a character they cannot encode.

- ``clip(text, n)``: at most about ``n`` characters, head and tail kept, the cut said
  (``'xxxx…[4,999,920 more]…xxx'``): a 5 MB name never makes a 5 MB message;
- ``printable(text)``: C0/C1 control characters and what XML cannot hold (U+FFFE,
  U+FFFF, lone surrogates) as ``\\xNN`` escapes; newlines and tabs stay;
- ``safe_streams()``: stdout and stderr write what their encoding cannot hold as
  ``\\uXXXX`` escapes (valid inside JSON strings too) instead of raising.
"""

from __future__ import annotations

import codecs
import re
import sys
from typing import Any

#: Characters no picture, terminal or XML file should receive raw.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")

ERRORS = "mpmd-lab-escape"


def clip(text: Any, n: int = 80) -> str:
    """``text`` (``str()`` of it) cut to about ``n`` characters, head and tail kept."""
    s = text if isinstance(text, str) else str(text)
    if len(s) <= n:
        return s
    tail = max(n // 4, 1)
    head = max(n - tail - 1, 1)
    return f"{s[:head]}…[{len(s) - head - tail:,} more]…{s[-tail:]}"


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with control and XML-invalid characters as visible escapes."""
    return _UNSAFE.sub(lambda m: _escape(m.group()), text)


def _json_escape(err: UnicodeError) -> tuple[str, int]:
    """Codec error handler: each unencodable character as ``\\uXXXX`` (surrogate pairs
    beyond the BMP), which a terminal shows and a JSON parser reads back."""
    if not isinstance(err, UnicodeEncodeError):
        raise err
    out = []
    for ch in err.object[err.start : err.end]:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), err.end


codecs.register_error(ERRORS, _json_escape)


def safe_streams() -> None:
    """Make ``sys.stdout``/``sys.stderr`` escape what their encoding cannot write."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            reconfigure(errors=ERRORS)
        except (ValueError, OSError, AttributeError):  # a closed or odd stream
            pass


__all__ = ["clip", "printable", "safe_streams"]
