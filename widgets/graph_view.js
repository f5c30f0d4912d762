// GraphSVG's browser side (anywidget ESM): shows the SVG that mpmd_lab.scene painted,
// with pan and zoom, a tooltip per node (kind, type, field path, problems) and click to
// select a node's field path (the `selected` trait). Everything drawn comes from
// Python; this file only places it and listens.

const FONT_UNITS = 10; // node text size in scene units (points); mpmd_lab.layout.BASE_PT
const MAX_SCALE = 1.4; // never blow a small graph up past this (px per point)
const FIT_MAX_PX = 4000; // "fit" grows the view up to this tall, then pans

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function tipHTML(info) {
  if (!info) return "";
  let out = `<div class="mpl-gsvg-tip-h">${esc(info.kind)} <b>${esc(info.label)}</b></div>`;
  if (info.type) out += `<div>${esc(info.type)}</div>`;
  if (info.path) out += `<div class="mpl-gsvg-tip-path">${esc(info.path)}</div>`;
  for (const p of info.problems || []) {
    const cls = p.error ? "mpl-gsvg-tip-err" : "mpl-gsvg-tip-warn";
    out += `<div class="${cls}"><b>${esc(p.code)}</b>: ${esc(p.message)}</div>`;
  }
  if (info.path) out += `<div class="mpl-gsvg-tip-hint">click to select this field</div>`;
  return out;
}

function render({ model, el }) {
  el.classList.add("mpl-gsvg");
  el.innerHTML = `
    <div class="mpl-gsvg-bar">
      <button class="mpl-gsvg-out" title="zoom out">−</button>
      <button class="mpl-gsvg-in" title="zoom in">+</button>
      <button class="mpl-gsvg-fit" title="the whole graph, text readable (the view grows)">fit</button>
      <button class="mpl-gsvg-one" title="readable size">1:1</button>
      <span class="mpl-gsvg-hint">drag to pan · Ctrl+wheel to zoom · hover a box for details</span>
      <span class="mpl-gsvg-sel"></span>
    </div>
    <div class="mpl-gsvg-row">
      <div class="mpl-gsvg-view"></div>
      <div class="mpl-gsvg-dev"></div>
    </div>
    <div class="mpl-gsvg-legend"></div>
    <div class="mpl-gsvg-problems"></div>
    <div class="mpl-gsvg-tip" hidden></div>`;
  const view = el.querySelector(".mpl-gsvg-view");
  const dev = el.querySelector(".mpl-gsvg-dev");
  const legend = el.querySelector(".mpl-gsvg-legend");
  const problems = el.querySelector(".mpl-gsvg-problems");
  const tip = el.querySelector(".mpl-gsvg-tip");
  const selLabel = el.querySelector(".mpl-gsvg-sel");
  const hint = el.querySelector(".mpl-gsvg-hint");
  let svg = null;
  let size = { w: 1, h: 1 };
  let vb = null; // the view: {x, y, w, h} in scene units
  let touched = false; // the user zoomed or panned: keep their view across repaints
  let shown = { svg: null, devices: null, legend: null, problems: null };
  let subject = null; // what the picture is of: another one starts from its first view

  const minScale = () => (model.get("readable_px") || 11) / FONT_UNITS;
  const width = () => view.clientWidth || el.clientWidth || 800;

  function autoView() {
    // as large as fits, but never so small that text is under readable_px
    const s = Math.min(Math.max(width() / size.w, minScale()), MAX_SCALE);
    const h = Math.min(size.h * s, model.get("max_height") || 560);
    view.style.height = `${Math.max(h, 60)}px`;
    vb = { x: 0, y: 0, w: width() / s, h: Math.max(h, 60) / s };
    hint.hidden = size.w * s <= width() + 1 && size.h * s <= h + 1;
    // too wide to show whole at a readable size: start where the first problem is
    const red = svg && svg.querySelector("g.node.red rect");
    if (red && size.w > vb.w) {
      const right = +red.getAttribute("x") + +red.getAttribute("width") + 12;
      if (right > vb.w) vb.x = Math.min(right - vb.w, size.w - vb.w);
    }
  }

  function fitView() {
    // the whole graph as large as the column allows but never under readable text: the
    // view grows as tall as the graph needs (the page scrolls); past FIT_MAX_PX, or a
    // graph wider than the column at readable size, it pans
    const s = Math.min(Math.max(width() / size.w, minScale()), MAX_SCALE);
    const h = Math.max(Math.min(size.h * s, FIT_MAX_PX), 60);
    view.style.height = `${h}px`;
    vb = { x: 0, y: 0, w: width() / s, h: h / s };
    hint.hidden = size.w * s <= width() + 1 && size.h * s <= h + 1;
    touched = true;
    apply();
  }

  function apply() {
    if (!svg || !vb) return;
    svg.setAttribute("viewBox", `${vb.x} ${vb.y} ${vb.w} ${vb.h}`);
    svg.setAttribute("width", "100%");
    svg.setAttribute("height", "100%");
  }

  function zoom(k, cx, cy) {
    // k > 1 zooms in, around (cx, cy) in view pixels
    if (!vb) return;
    const px = vb.x + (cx / width()) * vb.w;
    const py = vb.y + (cy / view.clientHeight) * vb.h;
    const w = Math.min(Math.max(vb.w / k, 20), size.w * 8);
    const h = (vb.h * w) / vb.w;
    vb = { x: px - ((px - vb.x) * w) / vb.w, y: py - ((py - vb.y) * h) / vb.h, w, h };
    touched = true;
    apply();
  }

  function markSelected() {
    const id = model.get("selected_id");
    for (const g of view.querySelectorAll("g.node.sel")) g.classList.remove("sel");
    if (id) {
      for (const g of view.querySelectorAll("g.node")) {
        if (g.dataset.id === id) g.classList.add("sel");
      }
    }
    const path = model.get("selected");
    selLabel.textContent = path ? `selected: ${path}` : "";
  }

  function paint() {
    const t0 = performance.now();
    // the panels beside and below first: the graph's width depends on them
    for (const [key, box] of [["devices", dev], ["legend", legend], ["problems", problems]]) {
      const v = model.get(key);
      if (v !== shown[key]) {
        box.innerHTML = v;
        shown[key] = v;
      }
    }
    dev.hidden = !model.get("devices");
    const s = model.get("svg");
    if (s !== shown.svg) {
      view.innerHTML = s;
      shown.svg = s;
      svg = view.querySelector("svg");
      if (svg) {
        const [, , w, h] = (svg.getAttribute("viewBox") || "0 0 1 1").split(/[ ,]+/).map(Number);
        size = { w: w || 1, h: h || 1 };
        // ask for the room readable text needs: the device panel wraps below if it must
        view.style.flexBasis = `${Math.ceil(size.w * minScale()) + 2}px`;
        if (model.get("subject") !== subject) {
          subject = model.get("subject");
          touched = false;
        }
        if (!touched) autoView();
        apply();
      }
    }
    el.classList.toggle("mpl-stale", !!model.get("stale"));
    markSelected();
    void view.offsetHeight; // lay the new SVG out now, inside the timed part
    const seq = model.get("seq");
    // the next frame is drawn between this callback and the timeout: time up to there
    requestAnimationFrame(() =>
      setTimeout(() => {
        model.set("render_ms", performance.now() - t0);
        model.set("painted_seq", seq);
        model.save_changes();
      }, 0),
    );
  }

  // pan by dragging; a click (no drag) selects the node under the pointer
  let drag = null;
  view.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    const node = e.target.closest?.("g.node") || null;
    drag = { x: e.clientX, y: e.clientY, vb: { ...vb }, moved: false, node };
    view.setPointerCapture?.(e.pointerId);
  });
  view.addEventListener("pointermove", (e) => {
    if (drag && vb) {
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      if (drag.moved) {
        const k = vb.w / width();
        vb = { ...vb, x: drag.vb.x - dx * k, y: drag.vb.y - dy * k };
        touched = true;
        apply();
        tip.hidden = true;
        return;
      }
    }
    const g = e.target.closest?.("g.node, g.edge");
    if (!g) {
      tip.hidden = true;
      return;
    }
    const key = g.classList.contains("node") ? `n:${g.dataset.id}` : `e:${g.dataset.id}`;
    const info = (model.get("info") || {})[key];
    if (!info) {
      tip.hidden = true;
      return;
    }
    tip.innerHTML = tipHTML(info);
    tip.hidden = false;
    const box = el.getBoundingClientRect();
    const x = Math.min(e.clientX - box.left + 14, Math.max(box.width - 320, 0));
    tip.style.left = `${x}px`;
    tip.style.top = `${e.clientY - box.top + 14}px`;
  });
  view.addEventListener("pointerleave", () => {
    tip.hidden = true;
  });
  view.addEventListener("pointerup", () => {
    const was = drag;
    drag = null;
    if (!was || was.moved) return;
    const g = was.node;
    model.set("selected_id", g ? g.dataset.id : "");
    model.set("selected", g ? g.dataset.path || "" : "");
    model.save_changes();
    markSelected();
  });
  view.addEventListener(
    "wheel",
    (e) => {
      if (!(e.ctrlKey || e.metaKey)) return; // plain wheel scrolls the notebook
      e.preventDefault();
      const r = view.getBoundingClientRect();
      zoom(Math.exp(-e.deltaY * 0.002), e.clientX - r.left, e.clientY - r.top);
    },
    { passive: false },
  );
  const centre = () => [width() / 2, view.clientHeight / 2];
  el.querySelector(".mpl-gsvg-in").onclick = () => zoom(1.25, ...centre());
  el.querySelector(".mpl-gsvg-out").onclick = () => zoom(0.8, ...centre());
  el.querySelector(".mpl-gsvg-fit").onclick = fitView;
  el.querySelector(".mpl-gsvg-one").onclick = () => {
    touched = false;
    autoView();
    apply();
  };
  view.addEventListener("dblclick", fitView);

  const restyle = () => el.classList.toggle("mpl-stale", !!model.get("stale"));
  // the column got wider or narrower: refit, unless the user chose a view
  let lastWidth = 0;
  const resized = new ResizeObserver(() => {
    const w = width();
    if (Math.abs(w - lastWidth) < 2 || !svg) return;
    lastWidth = w;
    if (!touched) autoView();
    else vb = { ...vb, h: (vb.w * view.clientHeight) / w };
    apply();
  });
  resized.observe(view);
  // a click opened an editor (the Lab marks it with the class in `focus`): bring it
  // into view, once the browser has it (the class arrives with the same message batch)
  function bringFocus() {
    const cls = model.get("focus");
    if (!cls) return;
    let tries = 0;
    const look = () => {
      const target = document.querySelector("." + CSS.escape(cls));
      if (target) target.scrollIntoView({ block: "center", behavior: "smooth" });
      else if (tries++ < 20) setTimeout(look, 50);
    };
    requestAnimationFrame(look);
  }
  model.on("change:seq", paint);
  model.on("change:stale", restyle);
  model.on("change:selected_id", markSelected);
  model.on("change:focus", bringFocus);
  paint();
  return () => {
    resized.disconnect();
    model.off("change:seq", paint);
    model.off("change:stale", restyle);
    model.off("change:selected_id", markSelected);
    model.off("change:focus", bringFocus);
  };
}

export default { render };
