"""CodeView: the JAX program a scenario stands for, the kernel first, highlighted, with
copy buttons.

``CodeView().show(source)`` splits ``codegen.generate``'s script into the part that is
the scenario's own (``build``: the meshes, the kernel bodies, the call) and the rest
(imports, the support code every script carries, the runner), highlights them with
Pygments where it is installed (it comes with JupyterLab), and shows the kernel open and
the whole script folded. Each part has a Copy button (the browser's clipboard; ``copies``
counts the copies made). ``text`` is the whole script, exactly as exported.
"""

from __future__ import annotations

import html
import re
from typing import Any

import anywidget
import traitlets as t

_ESM = r"""
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "mpl-code";
  el.appendChild(root);
  function copy(text, button) {
    const done = () => {
      button.textContent = "✔ copied";
      model.set("copies", model.get("copies") + 1);
      model.save_changes();
      setTimeout(() => { button.textContent = button.dataset.label; }, 1500);
    };
    const fallback = () => {
      const area = document.createElement("textarea");
      area.value = text; area.style.position = "fixed"; area.style.opacity = "0";
      document.body.appendChild(area); area.select();
      try { document.execCommand("copy"); done(); } catch (e) {}
      area.remove();
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else { fallback(); }
  }
  function draw() {
    root.innerHTML = model.get("html");
    const texts = model.get("texts");
    root.querySelectorAll("button[data-copy]").forEach((b) => {
      b.dataset.label = b.textContent;
      b.addEventListener("click", (ev) => {
        ev.preventDefault(); ev.stopPropagation();
        copy(texts[Number(b.dataset.copy)] || "", b);
      });
    });
  }
  model.on("change:html", draw);
  draw();
}
export default { render };
"""

_CSS = """
.mpl-code { font-size: 12px; }
.mpl-code details { margin: 4px 0; }
.mpl-code summary { cursor: pointer; color: #1565c0; }
.mpl-code .mpl-code-bar { display: flex; flex-wrap: wrap; gap: 4px 8px; align-items: center;
  margin: 2px 0; line-height: 1.4; }
.mpl-code .mpl-code-bar button { font: inherit; padding: 1px 10px; cursor: pointer;
  border: 1px solid #9ab; background: #f4f8fb; border-radius: 3px; flex: 0 0 auto;
  white-space: nowrap; }
.mpl-code .mpl-code-bar .mpl-hint { flex: 1 1 200px; }
.mpl-code pre { font-size: 11.5px; max-height: 420px; overflow: auto; background: #f8f8f8;
  border: 1px solid #dde; padding: 6px 8px; line-height: 1.35; margin: 2px 0;
  white-space: pre; overflow-wrap: normal; word-break: normal; }
"""

#: where the scenario's own code starts and its ``build`` ends, in ``codegen``'s script
_SCENARIO = "# ---- the scenario ----"
_TOP_DEF = re.compile(r"^def (\w+)\(", re.M)


def kernel_part(source: str) -> str:
    """The ``build`` function of a generated script (meshes, kernel bodies, the call),
    or the scenario's part, or the whole script if it has neither."""
    start = source.find("\ndef build(")
    if start < 0:
        at = source.find(_SCENARIO)
        return source[at:] if at >= 0 else source
    start += 1
    nxt = _TOP_DEF.search(source, start + 4)
    return source[start : nxt.start() if nxt else len(source)].rstrip() + "\n"


def highlight(code: str) -> str:
    """``code`` as highlighted HTML (Pygments), or escaped as it is without Pygments."""
    try:
        from pygments import highlight as _highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:  # pragma: no cover - Pygments comes with JupyterLab
        return f"<pre>{html.escape(code)}</pre>"
    return _highlight(code, PythonLexer(), HtmlFormatter(nowrap=False, noclasses=True))


class CodeView(anywidget.AnyWidget):
    """The exported JAX script: the kernel first, highlighted, each part copyable."""

    _esm = _ESM
    _css = _CSS
    html = t.Unicode("").tag(sync=True)
    texts = t.List(t.Unicode(), default_value=[]).tag(sync=True)
    copies = t.Int(0).tag(sync=True)

    @property
    def text(self) -> str:
        """The whole script, exactly as ``mpmd-lab export`` writes it ("" when hidden)."""
        return self.texts[1] if len(self.texts) > 1 else ""

    @property
    def kernel(self) -> str:
        return self.texts[0] if self.texts else ""

    def show(self, source: str) -> None:
        kernel = kernel_part(source)
        n = source.count("\n") + 1
        self.texts = [kernel, source]
        self.html = (
            "<div class='mpl-code-bar'><button data-copy='0'>Copy</button>"
            "<b>The kernel and its call</b> "
            "<span class='mpl-hint'>build(): meshes, kernel bodies, the jitted call</span></div>"
            f"{highlight(kernel)}"
            "<details><summary>The whole script "
            f"({n} lines: imports, support code, runner; what <code>mpmd-lab export</code> "
            "writes)</summary><div class='mpl-code-bar'><button data-copy='1'>Copy the whole "
            f"script</button></div>{highlight(source)}</details>"
        )

    def clear(self) -> None:
        self.texts, self.html = [], ""

    def _repr_keys(self) -> Any:  # keep the widget repr short in a notebook
        yield from ()
