"""Small building blocks the views share: fields that show their own errors, diagnostic
badges and cards, the Lab's stylesheet, and a re-render-only-when-changed section."""

from __future__ import annotations

import contextlib
import html
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as w
from mpmd_lab.diagnostics import Diagnostic
from mpmd_lab.session import EditResult, Session
from mpmd_lab.widgets import services
from pydantic import BaseModel

Commit = Callable[[Any], EditResult]

CSS = """
<style>
.mpl-lab { font-family: var(--jp-ui-font-family, sans-serif); }
.mpl-lab .mpl-title { font-size: 15px; font-weight: 600; }
.mpl-lab .mpl-h { font-weight: 600; margin: 6px 0 2px 0; color: #234; line-height: 1.4; }
.mpl-lab .mpl-hint { color: #667; font-size: 12px; }
.mpl-field-error { color: #b00020; font-size: 12px; }
.mpl-row { align-items: center; }
.mpl-badge { display: inline-block; padding: 1px 6px; border-radius: 8px; font-size: 11px;
  font-weight: 600; color: white; background: #b00020; margin-left: 4px; }
.mpl-badge.warning { background: #b26a00; }
.mpl-badge.info { background: #466; }
.mpl-card, .mpl-note, .mpl-ok, .mpl-diag-line, .mpl-table { line-height: 1.35; }
.mpl-card { border: 1px solid #e3b4b4; border-left: 5px solid #b00020; border-radius: 4px;
  padding: 6px 10px; margin: 4px 0; background: #fff7f7; }
.mpl-card.warning { border-color: #f0d2a0; border-left-color: #b26a00; background: #fffaf0; }
.mpl-card.info { border-color: #cdd; border-left-color: #466; background: #f6fafa; }
.mpl-card .mpl-code { font-family: var(--jp-code-font-family, monospace); font-weight: 700; }
.mpl-card .mpl-path { font-family: var(--jp-code-font-family, monospace); color: #555;
  font-size: 12px; }
.mpl-card .mpl-jax { font-family: var(--jp-code-font-family, monospace); font-size: 12px;
  background: #f3f3f3; padding: 2px 4px; margin: 3px 0; white-space: pre-wrap; }
.mpl-card .mpl-why { font-size: 13px; margin-top: 3px; }
.mpl-card .mpl-suggest { font-weight: 600; color: #1565c0; margin: 2px 0; }
.mpl-card ol { margin: 2px 0 2px 18px; padding: 0; }
.mpl-fix-row .mpl-fix-what { font-size: 12px; color: #234; margin-left: 6px;
  display: inline-block; line-height: 1.35; }
.mpl-fix-after { color: #b26a00; font-weight: 600; }
.mpl-fix-after.ok { color: #2e7d32; }
.mpl-lab .widget-button.mpl-fix.mpl-fix-alt { background: #e8f3e8; color: #1b5e20;
  border: 1px solid #2e7d32; }
.mpl-interp-note { border-left: 5px solid #5b7f95; background: #f2f7fa; padding: 4px 10px;
  border-radius: 4px; font-size: 12px; color: #234; }
.mpl-lab .widget-html-content div { line-height: 1.4; }
.mpl-i { display: inline-block; width: 15px; height: 15px; border-radius: 50%;
  background: #5b7f95; color: white; font: bold 11px/15px serif; text-align: center;
  margin-right: 4px; }
.mpl-ok { border-left: 5px solid #2e7d32; background: #f3fbf3; padding: 6px 10px;
  border-radius: 4px; }
.mpl-note { border-left: 5px solid #888; background: #f5f5f5; padding: 4px 10px;
  border-radius: 4px; font-size: 12px; color: #444; }
.mpl-stale { opacity: 0.45; }
.mpl-unsaved { color: #b26a00; font-size: 12px; font-weight: 600; }
.mpl-refused input, .mpl-refused textarea { border-color: #b00020 !important;
  background: #fff4f4 !important; }
.mpl-lab .mpl-labelled .widget-label { color: #667; font-size: 12px; }
.mpl-busy { color: #1565c0; font-size: 12px; font-weight: 600; margin-left: 8px; }
.mpl-about-stale { opacity: 0.7; }
.mpl-shape-line { margin-left: 22px; color: #2e5a88; }
.mpl-source { font-size: 11px; max-height: 420px; overflow: auto; background: #f7f7f7;
  border: 1px solid #dde; padding: 6px; line-height: 1.3; }
.mpl-more summary { cursor: pointer; color: #1565c0; font-size: 12px; margin-top: 3px; }
.mpl-more h3 { font-size: 14px; margin: 6px 0 2px 0; }
.mpl-more h4 { font-size: 13px; margin: 6px 0 2px 0; }
.mpl-more p, .mpl-more li { font-size: 12px; margin: 2px 0; }
.mpl-more pre { font-size: 11px; background: #f3f3f3; padding: 4px; white-space: pre-wrap; }
.mpl-step-bad { background: #fff0f0; border: 1px solid #e0a0a0; border-radius: 4px; }
.mpl-lab .mpl-step-below { margin-left: 22px; }
.mpl-lab .mpl-run-panel, .mpl-lab .mpl-run-results, .mpl-lab .mpl-run-results .widget-html,
.mpl-lab .mpl-run-results .widget-html-content { min-width: 0; max-width: 100%; }
.mpl-lab .mpl-table-scroll { overflow-x: auto; max-width: 100%; }
.mpl-table { border-collapse: collapse; font-family: var(--jp-code-font-family, monospace);
  font-size: 12px; }
.mpl-table td, .mpl-table th { border: 1px solid #ccd; padding: 1px 5px; text-align: right; }
.mpl-table th { background: #eef; }
.mpl-lab .widget-button.mpl-stmt-line { font-family: var(--jp-code-font-family, monospace);
  font-size: 12px; color: #1a2a3a; background: none; box-shadow: none; border: none;
  text-align: left; white-space: pre-wrap; overflow: visible; height: auto;
  line-height: 1.35; padding: 2px 6px; margin: 0; }
.mpl-lab .widget-button.mpl-stmt-line:hover { background: #e8f0fa; color: #0d47a1; }
.mpl-lab .mpl-stmt-open { background: #f4f8fd; }
.mpl-lab .mpl-stmt-open > .widget-button.mpl-stmt-line { font-weight: 600; color: #0d47a1; }
.mpl-lab .widget-button.mpl-fix { background: #2e7d32; color: white; }
.mpl-lab .widget-button.mpl-run { background: #1565c0; color: white; font-weight: 600; }
</style>
"""


_LAYOUTS: dict[tuple, w.Layout] = {}
_STYLES: dict[type, w.Widget] = {}


def lay(**kw: str) -> w.Layout:
    """A shared, never-mutated Layout: creating one per widget is most of a row's cost."""
    key = tuple(sorted(kw.items()))
    if key not in _LAYOUTS:
        _LAYOUTS[key] = w.Layout(**kw)
    return _LAYOUTS[key]


def make(cls: type[w.Widget], *, width: str | None = None, **kw: Any) -> Any:
    """``cls(**kw)`` with a shared layout (of ``width``) and a shared default style."""
    trait = cls.class_traits().get("style")
    if trait is not None and "style" not in kw:
        if cls not in _STYLES:
            _STYLES[cls] = trait.klass()
        kw["style"] = _STYLES[cls]
    kw.setdefault("layout", lay(width=width) if width else lay())
    return cls(**kw)


_LABELLED: dict[type, w.Widget] = {}

#: px per character of the UI font at 13 px (a little generous), and the widest a field
#: grows to fit what it holds
CHAR_PX = 7.6
MAX_FIELD_PX = 520


def text_px(text: str) -> int:
    """Pixels that show ``text`` whole in a field (its padding and a caret included)."""
    return int(len(text) * CHAR_PX) + 26


def _fit(widget: w.Widget, label: str) -> None:
    """Widen a fixed-width field so that its label and its value show whole (no
    truncated ``semaphore_s``, no ``(dev + axis_size(dev) -``): its width is a floor."""
    width = widget.layout.width or ""
    if not width.endswith("px") or widget.layout.display == "none":
        return
    value = widget.value if isinstance(getattr(widget, "value", None), str) else ""
    value = value or getattr(widget, "placeholder", "")  # an empty box shows its hint
    if isinstance(widget, w.Dropdown):
        value = str(widget.label or "") + "  ▾"
    need = text_px(value) + (text_px(label) - 14 if label else 0)
    if need > int(float(width[:-2])):
        keep = {"display": widget.layout.display} if widget.layout.display else {}
        widget.layout = lay(width=f"{min(need, MAX_FIELD_PX)}px", **keep)


def _labelled_style(cls: type[w.Widget]) -> Any:
    """The shared style of a ``cls`` field whose label is its description (as wide as
    the label, not ipywidgets' fixed column)."""
    if cls not in _LABELLED:
        _LABELLED[cls] = cls.class_traits()["style"].klass(description_width="initial")
    return _LABELLED[cls]


def style() -> w.HTML:
    """The Lab's stylesheet as a widget (put it once in the composed UI)."""
    return w.HTML(CSS, layout=w.Layout(height="0px", margin="0"))


def esc(text: Any) -> str:
    return html.escape(str(text))


def clip_path(path: Any, limit: int = 60) -> str:
    """A path short enough for a toolbar: its end, where the file name is."""
    text = str(path)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def close_tree(widget: w.Widget) -> None:
    """Close a widget and everything inside it (frees the front-end models)."""
    for child in getattr(widget, "children", ()) or ():
        close_tree(child)
    widget.close()


def problems_html(problems: list[tuple[str, str]]) -> str:
    return "<br>".join(
        f"<span class='mpl-field-error'>⚠ {esc(p + ': ' if p else '')}{esc(m)}</span>"
        for p, m in problems
    )


# ---------------------------------------------------------------- fields


#: Seconds a live field (one that commits as you type) waits after the last keystroke
#: before it commits, inside a kernel (a browser sends every keystroke); outside one
#: (scripts, tests) every change commits at once.
TYPING_DELAY = 0.3


def in_kernel() -> bool:
    """Running inside a Jupyter kernel (not a script or a test)."""
    try:
        from IPython import get_ipython

        ip = get_ipython()
        return ip is not None and getattr(ip, "kernel", None) is not None
    except ImportError:
        return False


#: the field whose value is being committed now (``Section.memo`` keeps its row)
_TYPING: list[w.Widget] = []


def typing() -> w.Widget | None:
    """The field being committed from now (None outside a field's commit)."""
    return _TYPING[-1] if _TYPING else None


@contextlib.contextmanager
def committing(widget: w.Widget) -> Any:
    """Commits made inside come from ``widget`` (its row is kept, as a typed field's)."""
    _TYPING.append(widget)
    try:
        yield
    finally:
        _TYPING.pop()


def _wire(
    widget: w.ValueWidget, refuse: Callable[[str], None], commit: Commit, parse: Callable | None
) -> None:
    pending: list[threading.Timer] = []

    def commit_now(raw: Any) -> None:
        try:
            value = parse(raw) if parse else raw
        except (ValueError, TypeError) as e:
            refuse(problems_html([("", str(e))]))
            return
        _TYPING.append(widget)
        try:
            result = commit(value)
        except Exception as e:  # never let a typed value take the UI down
            result = EditResult(False, [("", f"{type(e).__name__}: {e}")])
        finally:
            _TYPING.pop()
        refuse("" if result.ok else problems_html(result.problems))

    def on_change(change: dict[str, Any]) -> None:
        live = getattr(widget, "continuous_update", False)
        if TYPING_DELAY <= 0 or not live or not in_kernel():
            commit_now(change["new"])
            return
        for t in pending:  # a burst of keystrokes commits once, after the last one
            t.cancel()
        timer = threading.Timer(TYPING_DELAY, commit_now, (change["new"],))
        timer.name, timer.daemon = "mpmd-lab-typing", True
        pending[:] = [timer]
        timer.start()

    widget.observe(on_change, names="value")


def field(
    widget: w.ValueWidget,
    commit: Commit,
    parse: Callable | None = None,
    label: str | None = None,
    css: str | None = None,
    wrap: bool = True,
) -> w.Widget:
    """``widget``, its label, and (once a value is refused) the reason beside it, the
    field marked ``mpl-refused`` until a value is taken; a value that parses goes
    through ``commit``. The label carries the widget's tooltip (the field's help) too.

    ``wrap``: in a box of its own, where the reason goes; ``wrap=False``: the widget
    itself (one widget less: a big scenario has hundreds of fields), the reason put
    beside it in the box that hosts it (``host``)."""
    with widget.hold_sync():  # one message to the browser, not one a trait
        if css:
            widget.add_class(css)
        if label:  # its own description (one widget less a field: big bodies have 100s)
            widget.description = label
            widget.style = _labelled_style(type(widget))
            widget.add_class("mpl-labelled")
        _fit(widget, label or "")
    box = w.HBox([widget], layout=lay(align_items="center", flex_flow="row wrap")) if wrap else None

    def refuse(message: str) -> None:
        """Show why the value was refused ("" : taken); the line is made when first needed
        (a big body has hundreds of fields and few errors)."""
        error = getattr(widget, "mpl_error", None)
        if error is None and not message:
            return
        if error is None:
            error = make(w.HTML, value="", layout=lay(margin="0 0 0 4px"))
            error.add_class("mpl-error")
            widget.mpl_error = error
            _beside(box if box is not None else getattr(widget, "mpl_host", None), widget, error)
        error.value = message
        if message:
            widget.add_class("mpl-refused")
        else:
            widget.remove_class("mpl-refused")

    _wire(widget, refuse, commit, parse)
    return box if box is not None else widget


def host(box: w.Box) -> w.Box:
    """``box``, made the host of its unwrapped fields (``field(wrap=False)``): a refused
    value's reason goes beside the field in it."""
    for kid in box.children:
        kid.mpl_host = box
    return box


def _beside(box: w.Box | None, widget: w.Widget, extra: w.Widget) -> None:
    """Put ``extra`` just after ``widget`` in ``box`` (last if it is not there)."""
    if box is None:  # no host: the field is marked (and its status line says why)
        return
    kids = list(box.children)
    at = next((k + 1 for k, x in enumerate(kids) if x is widget), len(kids))
    box.children = (*kids[:at], extra, *kids[at:])


def text(
    value: str,
    width: str = "120px",
    placeholder: str = "",
    live: bool = True,
    tooltip: str | None = None,
) -> w.Text:
    """A text field. ``live``: it commits as you type (a name, ``live=False``, commits on
    Enter or when you leave it: renaming at every keystroke would re-point its uses)."""
    if tooltip is None and not live:
        tooltip = "press Enter (or leave the field) to rename"
    return make(
        w.Text,
        width=width,
        value=value,
        continuous_update=live,
        placeholder=placeholder,
        tooltip=tooltip,
    )


def name_box(value: str, width: str = "80px", placeholder: str = "") -> w.Text:
    """A name: committed on Enter or when the field is left."""
    return text(value, width, placeholder, live=False)


def int_box(value: int, width: str = "70px") -> w.Text:
    """An integer as text: any typing is accepted, a non-integer shows beside it."""
    return text(str(value), width)


def parse_int(s: str) -> int:
    try:
        return int(s.strip())
    except ValueError:
        raise ValueError(f"{s!r} is not a whole number") from None


def parse_shape(s: str) -> list[int]:
    """``"256, 4"`` or ``[256, 4]`` -> ``[256, 4]``; ``""`` -> ``[]`` (a scalar)."""
    s = s.strip().strip("[]()").strip()
    if not s:
        return []
    try:
        return [int(p) for p in s.replace(" ", ",").split(",") if p]
    except ValueError:
        raise ValueError(f"{s!r}: a shape is whole numbers separated by commas") from None


def show_shape(shape: list[int]) -> str:
    return ", ".join(str(d) for d in shape)


def parse_json(s: str) -> Any:
    """A JSON value; a bare word is taken as a string (``dev`` -> ``"dev"``)."""
    s = s.strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        if s.isidentifier():
            return s
        raise ValueError(f"not JSON: {e.msg} (column {e.colno})") from None


def show_json(value: Any) -> str:
    return json.dumps(value)


def parse_value(s: str) -> Any:
    """A field value as typed: JSON where it is JSON (``2``, ``[0, 1]``, ``"x"``), else the
    text itself, an index expression (``dev + 1``, ``program_id(0) * 128``)."""
    text = s.strip()
    if not text:
        raise ValueError("empty: type a value")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if text[:1] in "[{":
            raise ValueError("not JSON: a list or mapping is written as JSON") from None
        return text


def show_value(value: Any) -> str:
    """A field value as shown in its box: a string (an expression) bare, the rest JSON."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _kinds(ann: Any) -> tuple[set[str], tuple[Any, ...]]:
    """The plain kinds a field's annotation allows (``int``, ``str``, ``bool``, ``list``,
    ``dict``) and its Literal choices."""
    import types
    import typing

    kinds: set[str] = set()
    choices: list[Any] = []
    stack = [ann]
    while stack:
        t = stack.pop()
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            stack.append(typing.get_args(t)[0])
        elif origin in (typing.Union, types.UnionType):
            stack += list(typing.get_args(t))
        elif origin is typing.Literal:
            choices += list(typing.get_args(t))
        elif origin in (list, tuple):
            kinds.add("list")
        elif origin is dict:
            kinds.add("dict")
        elif t is bool:
            kinds.add("bool")
        elif t in (int, float):
            kinds.add("int")
        elif t is str:
            kinds.add("str")
        elif t is type(None):
            kinds.add("none")
        else:
            kinds.add("other")
    return kinds, tuple(choices)


def model_field(
    state: Session,
    path: str,
    cls: type[BaseModel],
    name: str,
    value: Any,
    css: str | None = None,
    wrap: bool = True,
) -> w.Widget:
    """An editor for field ``name`` of op class ``cls`` at ``path``, made from the model:
    a pick list for a choice, a tick box for a flag, a text box (commits as you type)
    for the rest; the field's help in its tooltip and on its label (``wrap``: as
    ``field``'s)."""
    info = cls.model_fields[name]
    kinds, choices = _kinds(info.annotation)
    help_text = info.description or ""

    def commit(v: Any) -> EditResult:
        return state.edit(("replace", path, v), label=f"set {path}")

    css = css or f"mpl-f-{name}"
    if choices and not (kinds - {"none"}):
        dd = make(
            w.Dropdown,
            options=list(choices),
            value=value,
            layout=lay(width="110px"),
            tooltip=help_text,
        )
        return field(dd, commit, label=name, css=css, wrap=wrap)
    if kinds == {"bool"}:
        cb = make(w.Checkbox, value=bool(value), description=name, indent=False, tooltip=help_text)
        return field(cb, commit, css=css, wrap=wrap)
    shown = getattr(cls, "TEXT_SHOWN", {}).get(name, lambda v: None)(value)
    width = "130px" if kinds & {"list", "dict"} else "110px"
    hint = help_text if len(help_text) <= 40 else ""  # whole, or in the tooltip
    box = text(show_value(value) if shown is None else shown, width, hint, tooltip=help_text)
    # the op's own syntax (``0:64``, ``pl.ds(i, 8)`` for an index), else JSON or a value
    parse = getattr(cls, "TEXT_FIELDS", {}).get(name)
    if parse is None:
        json_only = not (kinds & {"str"}) and kinds & {"list", "dict", "other"}
        parse = parse_json if json_only else parse_value

    def parse_or_say(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as e:  # the status line says so too (not the last "set")
            state.refuse(path, str(e))
            raise

    return field(box, commit, parse_or_say, label=name, css=css, wrap=wrap)


def button(
    description: str,
    on_click: Callable[[], Any],
    tooltip: str = "",
    css: str | tuple[str, ...] | None = None,
    width: str | None = None,
    layout: w.Layout | None = None,
) -> w.Button:
    """A button that calls ``on_click()``; ``css``: its class (or classes)."""
    classes = (css,) if isinstance(css, str) else tuple(css or ())
    kw: dict[str, Any] = {"layout": layout} if layout is not None else {}
    b = make(
        w.Button,
        width=width,
        description=description,
        tooltip=tooltip or description,
        _dom_classes=classes,
        **kw,
    )
    b.on_click(lambda _b: on_click())
    return b


def use_simulate_button(on_click: Callable[[], Any]) -> w.Button:
    """The offer to run with the simulator where JAX's CPU interpreter cannot."""
    b = button(
        "Use simulate",
        on_click,
        "run with mpmd-lab's simulator (numpy, every device)",
        css="mpl-use-simulate",
    )
    b.layout = lay(width="120px")
    return b


def small(description: str, on_click: Callable[[], Any], tooltip: str, css: str | None = None):
    return button(description, on_click, tooltip, css, width="32px")


# ---------------------------------------------------------------- diagnostics


def badges(diags: list[Diagnostic]) -> str:
    """Inline code badges for the diagnostics of one row."""
    return "".join(
        f"<span class='mpl-badge {d.severity}' title='{esc(d.message)}'>{esc(d.code)}</span>"
        for d in diags
    )


def _badge_html(diags: list[Diagnostic]) -> str:
    return "".join(
        f"<div>{badges([d])} <span class='mpl-hint'>{esc(d.message)}</span></div>" for d in diags
    )


def badge_line(
    diags: list[Diagnostic], path: str | None = None, layout: w.Layout | None = None
) -> w.HTML:
    """A row's diagnostics as badges and messages (empty when it has none).

    With ``path``, a row kept while its field is typed into (``Section.memo``) updates
    it in place from the session's diagnostics at that path."""
    kw: dict[str, Any] = {"layout": layout} if layout is not None else {}
    out = make(w.HTML, value=_badge_html(diags), _dom_classes=("mpl-diag-line",), **kw)
    if path is not None:
        out.mpl_badge_path = path
    return out


def badges_at(state: Session, path: str, layout: w.Layout | None = None) -> w.HTML:
    """The badge line of the problems at ``path`` (interpreter notes apart)."""
    return badge_line(services.problems_at(state, path), path, layout)


def fix_html(fix: Any, best: bool = False) -> str:
    """A fix's description and what it leaves (``→ valid`` / ``→ then CODE``)."""
    after = getattr(fix, "after", None)
    then = ""
    if after is not None:
        then = (
            " <span class='mpl-fix-after ok'>→ valid</span>"
            if not after
            else f" <span class='mpl-fix-after'>→ then {esc(', '.join(after))}</span>"
        )
    return (
        f"<span class='mpl-fix-what'>{esc(fix.description)}{then}"
        f"{' <i>(best)</i>' if best else ''}</span>"
    )


def fix_row(fix: Any, index: int, on_click: Callable[[], Any], best: bool = False) -> w.HBox:
    """An "Apply fix" button (the first one green) and what the fix does."""
    b = button(
        "✔ Apply fix" if index == 0 else f"Apply fix {index + 1}",
        on_click,
        fix.description,
        css="mpl-fix",
    )
    if index:
        b.add_class("mpl-fix-alt")
    b.layout = lay(width="120px", flex="0 0 auto")
    what = make(w.HTML, value=fix_html(fix, best), layout=lay(flex="1 1 240px"))
    row = w.HBox([b, what], layout=lay(align_items="center", flex_flow="row wrap"))
    row.add_class("mpl-fix-row")
    return row


def _message_lines(d: Diagnostic) -> list[str]:
    """What it says: JAX's exact words (once), and mpmd-lab's words where they differ."""
    if d.jax is None:
        return [f"<div>{esc(d.message)}</div>"]
    jax = f"<div class='mpl-jax'>{esc(d.jax.type)}: {esc(d.jax.message)}</div>"
    if d.message.strip() == d.jax.message.strip():
        return [jax]
    if d.message.startswith(d.jax.message.strip()):  # JAX's words and a hint after them
        rest = d.message[len(d.jax.message.strip()) :].strip(" ()")
        return [jax, f"<div class='mpl-suggest'>{esc(rest)}</div>"]
    return [f"<div>{esc(d.message)}</div>", jax]


def diagnostic_html(d: Diagnostic, with_card: bool = True, with_fix: bool = True) -> str:
    """A diagnostic as an explanation card: code, where, what JAX says, why."""
    title = services.title_of(d.code, d.message)
    parts = [
        f"<div class='mpl-card {d.severity}' data-code='{esc(d.code)}'>",
        f"<span class='mpl-code'>{esc(d.code)}</span>",
        f" <b>{esc(title)}</b>" if title else "",
        f" <span class='mpl-hint'>({esc(d.severity)}; {esc(services.where_raised(d))})</span>",
        f"<div class='mpl-path'>at {esc(d.path or 'the call')}</div>",
        *_message_lines(d),
    ]
    if d.explanation:
        parts.append(f"<div class='mpl-why'>{esc(d.explanation)}</div>")
    card = services.card_html(d.code) if with_card else None
    if card:
        parts.append(
            "<details class='mpl-more'><summary>More: what it means, how to fix it, an example"
            f"</summary>{card}</details>"
        )
    fixes = list(d.fixes) or ([d.fix] if d.fix is not None else [])
    if with_fix and len(fixes) == 1:
        parts.append(f"<div class='mpl-hint'>Fix: {fix_html(fixes[0])}</div>")
    elif with_fix and fixes:
        items = "".join(f"<li>{fix_html(f)}</li>" for f in fixes)
        parts.append(f"<div class='mpl-hint'>Fixes, best first:<ol>{items}</ol></div>")
    parts.append("</div>")
    return "".join(parts)


#: memo rows a Section keeps from earlier renders (an undo of opening a big scenario
#: reuses its rows instead of building hundreds of widgets again)
RECENT_ROWS = 400


class Section(w.VBox):
    """A box that re-renders from the state only when its key (what it shows) changed.

    ``render(section)`` returns the children; it may wrap any child in
    ``section.memo(key, build)`` so that a row whose key is unchanged is reused, not rebuilt
    (rebuilding every widget on every edit is what makes a UI slow).
    """

    children: Sequence[w.Widget]  # the Box trait (ipywidgets has no type information)

    def __init__(self, state: Session, key: Callable[[], Any], render: Callable[..., list]):
        super().__init__()
        self._state, self._key, self._render = state, key, render
        self._last: Any = object()
        self._cache: dict[Any, w.Widget] = {}
        self._used: dict[Any, w.Widget] = {}
        self._idents: dict[Any, w.Widget] = {}
        self._new_idents: dict[Any, w.Widget] = {}
        #: rows of earlier renders no longer shown, newest last, kept (not closed) so an
        #: undo, a redo or reopening a scenario finds them by their content key
        self._recent: dict[Any, w.Widget] = {}
        self.refresh()

    def memo(self, key: Any, build: Callable[[], w.Widget], ident: Any = None) -> w.Widget:
        """The widget built for ``key`` last time, or a new one from ``build()``.

        ``ident`` names the row whatever its values (``("buffer", "x")``): while one of
        its fields commits as you type, the row is kept (the field keeps its focus and
        caret) and only its badges and ``mpl_refresh()`` are brought up to date."""
        widget = self._cache.get(key) or self._used.get(key) or self._recent.pop(key, None)
        if widget is None and ident is not None:
            old = self._idents.get(ident)
            field = typing()
            # (a typed field keeps its row; a pick -- a kind, a flag -- may reshape it)
            typed = isinstance(field, w.Text | w.Textarea | w.Combobox)
            if old is not None and typed and _holds(old, field):
                widget = old
                self._update(widget)
        if widget is None:
            widget = build()
        if ident is not None:
            self._new_idents[ident] = widget
        self._used[key] = widget
        return widget

    def row(self, ident: Any) -> w.Widget | None:
        """The row on screen named ``ident`` (``memo``'s), or None."""
        return self._idents.get(ident)

    def _reconcile(self, old: list[w.Widget], new: list[w.Widget]) -> list[w.Widget]:
        """``new``, with each plain HTML line that takes the place of one of the same
        kind kept and given the new text. The browser re-creates every child from the
        first one that changed, so a heading rebuilt above a field being typed into
        would take its focus; a kept one does not."""
        memo = {id(x) for x in self._used.values()}
        out = []
        for i, x in enumerate(new):
            prev = old[i] if i < len(old) else None
            if (
                prev is not None
                and prev is not x
                and id(x) not in memo
                and id(prev) not in memo
                and _same_kind(prev, x)
            ):
                if prev.value != x.value:
                    prev.value = x.value
                if getattr(x, "mpl_badge_path", None) is not None:
                    prev.mpl_badge_path = x.mpl_badge_path
                x.close()
                out.append(prev)
            else:
                out.append(x)
        return out

    def _update(self, row: w.Widget) -> None:
        """A kept row's badges and derived parts, from the session as it is now."""
        refresh = getattr(row, "mpl_refresh", None)
        if refresh is not None:
            refresh()
        for x in _walk(row):
            path = getattr(x, "mpl_badge_path", None)
            if path is not None:
                x.value = _badge_html(services.problems_at(self._state, path))

    def refresh(self, force: bool = False) -> None:
        try:
            key = self._key()
        except Exception:
            key = object()
        if not force and key == self._last:
            return
        self._last = key
        old = self.children
        self._used, self._new_idents = {}, {}
        try:
            new = self._render(self)
        except Exception as e:  # a view bug shows in place; the scenario is untouched
            self._used = {}
            new = [w.HTML(problems_html([("", f"this view failed: {e!r}")]))]
        self.children = self._reconcile(list(old), new)
        kept = {id(x) for x in self._used.values()} | {id(x) for x in self.children}
        memo = {id(x) for x in self._cache.values()}
        for key, row in self._cache.items():  # memo rows dropped now: kept for an undo
            if id(row) not in kept:
                self._recent.pop(key, None)
                self._recent[key] = row
        for child in {id(x): x for x in old}.values():
            if id(child) not in kept and id(child) not in memo:
                close_tree(child)
        while len(self._recent) > RECENT_ROWS:  # the oldest go for good
            close_tree(self._recent.pop(next(iter(self._recent))))
        self._cache, self._used = self._used, {}
        self._idents, self._new_idents = self._new_idents, {}


def _same_kind(a: w.Widget, b: w.Widget) -> bool:
    return type(a) is type(b) is w.HTML and a._dom_classes == b._dom_classes


def _walk(root: w.Widget) -> Any:
    yield root
    for child in getattr(root, "children", ()) or ():
        yield from _walk(child)


def _holds(root: w.Widget, widget: w.Widget) -> bool:
    return any(x is widget for x in _walk(root))


#: Choices a picker of names (buffers, refs in scope) lists at most; a combo box takes any
#: name typed, a dropdown keeps the current one.
MAX_OPTIONS = 200


def choices(names: list[str], current: str | None = None) -> list[str]:
    """``names`` cut to ``MAX_OPTIONS``, with ``current`` kept."""
    out = list(names[:MAX_OPTIONS])
    if current is not None and current not in out:
        out.append(current)
    return out


#: Rows one list of an editor (buffers, arguments, outputs, scratch, a program's
#: statements) shows at most: an editor is bounded by what it draws, not by the scenario
#: (2,000 outputs took a minute to open); the rest are said, and edited in the JSON.
MAX_ROWS = 100


def more_rows(sec: Section, total: int, what: str, shown: int = MAX_ROWS) -> list[w.Widget]:
    """The note under a list cut at ``shown`` rows of ``total`` (none when all are shown)."""
    if total <= shown:
        return []

    def build() -> w.Widget:
        note = w.HTML(
            f"<div class='mpl-note'>showing the first {shown:,} of {total:,} {esc(what)}; "
            "the others are in the scenario's JSON (save it to edit them there)</div>"
        )
        note.add_class("mpl-more-rows")
        return note

    return [sec.memo(("more-rows", what, shown, total), build)]
