"""The Lab in JupyterLab, by clicks in Chromium: pass the Ref a second time, see
MPMD_DUP_REF flagged on the row and as a card, apply the fix, run, read the outputs;
then open peer-then-multicast, see its failing step highlighted, apply the fix."""

from __future__ import annotations

import json
import time

import pytest

pytestmark = pytest.mark.browser


def test_dup_ref_story_by_clicks(lab_server, page, artifacts, run_notebook):
    from playwright.sync_api import expect

    base, _work = lab_server
    page.set_viewport_size({"width": 1400, "height": 2000})  # the whole Lab on screen
    t0 = time.monotonic()
    run_notebook(page, base, "lab_story.ipynb")
    lab = page.locator(".mpl-lab")
    expect(lab).to_be_visible()
    problems = page.locator(".mpl-problems")
    expect(problems).to_contain_text("no problems found")

    # pass the same Ref again: the new argument row is flagged at once, and a card explains
    page.locator("button.mpl-add-arg").click()
    expect(page.locator(".mpl-arg-1")).to_contain_text("MPMD_DUP_REF")
    expect(problems).to_contain_text("Cannot pass the same ref into a mpmd map multiple times")
    expect(page.locator(".mpl-titlebar")).to_contain_text("JAX would reject")
    # the graph is redrawn just after the edit: shown greyed until the new picture arrives;
    # it is SVG in the page, the new argument's problem marked on its node
    expect(page.locator(".mpl-graph .mpl-gsvg-view svg")).to_be_visible(timeout=120_000)
    expect(page.locator(".mpl-graph .mpl-stale")).to_have_count(0, timeout=120_000)
    expect(page.locator(".mpl-graph g.node.red").first).to_contain_text("MPMD_DUP_REF")
    lab.screenshot(path=str(artifacts / "lab_dup_ref.png"))

    # a typo never loses work: the bad value stays, the error is shown beside it
    param = page.locator(".mpl-param input").nth(1)
    param.fill("class")
    param.press("Enter")
    expect(page.locator(".mpl-arg-1")).to_contain_text("keyword")
    expect(param).to_have_value("class")

    # apply the fix from the card
    page.locator(".mpl-problems button.mpl-fix").click()
    expect(problems).to_contain_text("no problems found")
    expect(page.locator(".mpl-arg-1")).to_have_count(0)

    # run it (Pallas interpret mode on this CPU) and read the outputs
    print(f"lab shown and edited: {time.monotonic() - t0:.1f} s")
    page.locator("button.mpl-run").click()
    status = page.locator(".mpl-run-status")
    expect(status).to_contain_text("ran", timeout=150_000)
    out = page.locator(".mpl-output-out")
    expect(out).to_contain_text("[256] float32")
    expect(out.locator("td").nth(3)).to_have_text("6")  # acc + acc, acc = iota
    expect(out.locator("img")).to_be_visible()
    print(f"ran: {time.monotonic() - t0:.1f} s")
    lab.screenshot(path=str(artifacts / "lab_run.png"))

    # the Meshes tab draws the kernel mesh's blocks
    page.locator(".mpl-tabs .lm-TabBar-tab", has_text="Meshes").click()
    expect(page.locator(".mpl-mesh-editor")).to_contain_text("grid b=1 → 1 block")
    expect(page.locator("svg.mpl-blocks rect")).to_have_count(1)

    # the second story from the gallery: a multicast view of a peer view, in the Views tab
    page.locator(".mpl-gallery select").select_option(label="peer-then-multicast")
    expect(page.locator(".mpl-titlebar")).to_contain_text("peer-then-multicast")
    page.locator(".mpl-tabs .lm-TabBar-tab", has_text="Views").click()
    bad = page.locator(".mpl-transform-editor .mpl-step-bad").first
    expect(bad).to_contain_text("REF_PEER_TO_MULTICAST")
    expect(page.locator(".mpl-transform-editor")).to_contain_text("f32[128] GMEM peer")
    lab.screenshot(path=str(artifacts / "lab_views.png"))
    page.locator(".mpl-tabs .lm-TabBar-tab", has_text="Meshes").click()
    expect(page.locator(".mpl-mesh-editor")).to_contain_text("dev 1")
    lab.screenshot(path=str(artifacts / "lab_meshes.png"))
    page.locator(".mpl-tabs .lm-TabBar-tab", has_text="Views").click()
    fixes = page.locator(".mpl-problems button.mpl-fix")
    expect(fixes).to_have_count(2)  # both ways out, best first
    expect(page.locator(".mpl-problems .mpl-fix-row").first).to_contain_text("(best)")
    fixes.first.click()
    expect(problems).to_contain_text("no problems found")
    expect(page.locator(".mpl-transform-editor .mpl-step-bad")).to_have_count(0)


def test_ring_shift_runs_with_auto_on_the_cpu(lab_server, page, artifacts, run_notebook):
    """The README's hero example on a CPU machine: ring-shift opens with the CPU
    interpreter's limit said once; ▶ Run with auto runs the simulator, says why, and
    shows the shifted values. Then: typing commits without Enter and keeps the focus,
    Show JAX code shows the kernel first and copies it, Cancel stops a run."""
    from playwright.sync_api import expect

    base, _work = lab_server
    page.set_viewport_size({"width": 1400, "height": 2000})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    run_notebook(page, base, "lab_story.ipynb")
    lab = page.locator(".mpl-lab")
    page.locator(".mpl-gallery select").select_option(label="ring-shift")
    expect(page.locator(".mpl-titlebar")).to_contain_text("ring-shift")
    expect(page.locator(".mpl-titlebar")).to_contain_text("valid")
    note = page.locator(".mpl-problems .mpl-interp")
    expect(note).to_have_count(1)
    expect(note).to_contain_text(
        "on this machine: simulate runs it (JAX's CPU interpreter cannot run remote_ref views"
    )
    expect(page.locator(".mpl-lab .mpl-card")).to_have_count(0)  # not a warning card
    expect(page.locator(".mpl-graph .mpl-gsvg-view svg")).to_be_visible(timeout=120_000)
    expect(page.locator(".mpl-graph .mpl-gsvg-problems")).not_to_contain_text("GPU_INTERP")

    # ▶ Run with auto: the simulator, and why
    expect(page.locator(".mpl-run-panel select").first).to_have_value("auto")
    page.locator("button.mpl-run").click()
    status = page.locator(".mpl-run-status")
    expect(status).to_contain_text("ran", timeout=150_000)
    expect(status).to_contain_text("on simulate")
    expect(status).to_contain_text("auto: no GPU here")
    out = page.locator(".mpl-output-out")
    expect(out).to_contain_text("[1024] float32")
    expect(out.locator("td").first).to_have_text("768")  # device 0 holds device 3's x
    expect(page.locator(".mpl-run-panel .mpl-jax-full")).to_have_count(0)  # no traceback
    lab.screenshot(path=str(artifacts / "lab_ring_shift_run.png"))
    box = lab.bounding_box()  # the Lab in JupyterLab, as README's picture shows it
    bottom = min(box["y"] + box["height"] + 8, 2000)
    page.screenshot(
        path=str(artifacts / "lab_in_jupyterlab.png"),
        clip={"x": 0, "y": 0, "width": 1400, "height": bottom},
    )

    # typing commits as you type (no Enter) and the field keeps the focus
    shape = page.locator(".mpl-buffer-shape input").first
    shape.click()
    shape.press("End")
    page.keyboard.type("0", delay=60)  # 256 -> 2560: x no longer fits out
    expect(page.locator(".mpl-titlebar")).to_contain_text("JAX would reject", timeout=20_000)
    focused = "document.activeElement && !!document.activeElement.closest('.mpl-buffer-shape')"
    assert page.evaluate(focused), "the field lost its focus while typing"
    page.keyboard.press("Backspace")
    expect(page.locator(".mpl-titlebar")).to_contain_text("valid", timeout=20_000)
    expect(page.locator(".mpl-run-status")).to_contain_text("changed since this run")

    # Show JAX code: the kernel first, highlighted, copied with one click
    page.locator("button.mpl-show-code").click()
    code = page.locator(".mpl-code-view")
    expect(code.locator("pre").first).to_contain_text("def build(")
    expect(code.locator("pre").first).to_contain_text("plgpu.remote_ref")
    code.locator("button[data-copy='0']").click()
    expect(code.locator("button[data-copy='0']")).to_contain_text("copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("def build(") and "plgpu.remote_ref" in copied
    lab.screenshot(path=str(artifacts / "lab_ring_shift_code.png"))

    # Cancel stops a run; the next run runs
    page.locator(".mpl-run-panel select").first.select_option("interpret")
    page.locator("button.mpl-run").click()
    cancel = page.locator("button.mpl-cancel")
    expect(cancel).to_be_visible()
    cancel.click()
    expect(status).to_contain_text("cancelled")
    expect(cancel).to_be_hidden()
    page.locator(".mpl-run-panel select").first.select_option("simulate")
    page.locator("button.mpl-run").click()
    expect(status).to_contain_text("ran", timeout=150_000)


def test_every_gallery_scenario_in_the_lab(lab_server, page, artifacts, run_notebook):
    """Each gallery scenario opened in the Lab: its problems as the check finds them,
    its graph drawn; a screenshot of each (test-artifacts/gallery/NAME.png)."""
    from mpmd_lab import gallery, runtime, validate
    from playwright.sync_api import expect

    base, _work = lab_server
    page.set_viewport_size({"width": 1400, "height": 1800})
    run_notebook(page, base, "lab_story.ipynb")
    lab = page.locator(".mpl-lab")
    shots = artifacts / "gallery"
    shots.mkdir(exist_ok=True)
    problems = page.locator(".mpl-problems")
    # (the kernel is done with an open when the dropdown is back at its placeholder:
    # choosing the next one before that raced the reset of the previous one)
    reset = "() => document.querySelector('.mpl-gallery select').selectedIndex === 0"
    for name in gallery.names():
        page.wait_for_function(reset, timeout=60_000)
        page.locator(".mpl-gallery select").select_option(label=name)
        # (opening runs the check and redraws the graph: give a loaded machine time)
        expect(page.locator(".mpl-titlebar")).to_contain_text(name, timeout=60_000)
        diags = [d for d in validate.check(gallery.load(name)) if not runtime.interpreter_limit(d)]
        errors = sum(d.is_error for d in diags)
        if diags:
            expect(problems).to_contain_text(f"{errors} error(s), {len(diags) - errors} warning")
        else:
            expect(problems).to_contain_text("no problems found")
        expect(page.locator(".mpl-graph .mpl-gsvg-view svg")).to_be_visible(timeout=120_000)
        expect(page.locator(".mpl-graph .mpl-stale")).to_have_count(0, timeout=120_000)
        lab.screenshot(path=str(shots / f"{name}.png"))


def test_big_kernel_walk(lab_server, page, artifacts, run_notebook):
    """Issue 30's walk on the largest gallery scenario: open it and press Run in the same
    moment (the run is of the scenario then shown), undo and redo the open, click a view's
    box (its stack comes into view), type ``0:64`` in its index (taken) and ``0:64:2``
    (refused: the field marked, the status line says "not set"), Save; then open a seed
    error, "Fix all" to a valid scenario, Save it."""
    from playwright.sync_api import expect

    base, work = lab_server
    page.set_viewport_size({"width": 1400, "height": 1100})
    run_notebook(page, base, "lab_story.ipynb")
    title = page.locator(".mpl-titlebar")

    def shot(where, name: str) -> None:
        """What the user sees with ``where`` scrolled into view (the window, 1400x1100)."""
        where.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / name))

    page.locator(".mpl-run-panel select").first.select_option("simulate")
    status = page.locator(".mpl-run-status")
    expect(page.locator("button.mpl-run")).to_be_enabled()
    t0 = time.monotonic()
    # the gallery pick and the Run press leave the browser in one go: the kernel gets the
    # press before it has even begun opening, so it is handled while (or after) the open
    # runs, never before it; there is no second press
    page.evaluate(
        """() => {
            const pick = document.querySelector('.mpl-gallery select');
            const want = [...pick.options].find(o => o.textContent === 'collective-matmul');
            pick.value = want.value;
            pick.dispatchEvent(new Event('change', {bubbles: true}));
            document.querySelector('button.mpl-run').click();
        }"""
    )
    expect(title).to_contain_text("collective-matmul", timeout=60_000)
    print(f"open shown in the browser: {time.monotonic() - t0:.2f} s")
    expect(status).to_contain_text("ran", timeout=150_000)
    expect(page.locator(".mpl-output-out")).to_contain_text("[1024, 128]")  # not [256]
    expect(status).not_to_contain_text("finished after you opened")
    panel = page.locator(".mpl-run-panel").bounding_box()
    table = page.locator(".mpl-output-out .mpl-table-scroll").bounding_box()
    assert panel and table and table["x"] + table["width"] <= panel["x"] + panel["width"] + 1
    shot(title, "big_open_run.png")

    for button, name in (("mpl-undo", "dup-ref-fixed"), ("mpl-redo", "collective-matmul")):
        t0 = time.monotonic()
        page.locator(f"button.{button}").click()
        expect(title).to_contain_text(name, timeout=60_000)
        print(f"{button} shown in the browser: {time.monotonic() - t0:.2f} s")
    expect(page.locator(".mpl-busy")).to_have_count(0)
    # the body as lines of source, each unfolded on demand; the loop folded in its line
    call = page.locator(".mpl-call-editor")
    expect(call.locator(".mpl-stmt-line")).to_have_count(16)
    expect(call.locator(".mpl-stmt-open")).to_have_count(0)
    expect(call.locator(".mpl-stmt-line").nth(15)).to_contain_text("12 statement(s) inside")
    shot(call.locator(".mpl-stmt-line").first, "big_call_folded.png")

    # a view's box: its stack in the Views tab, brought into view
    expect(page.locator(".mpl-graph .mpl-gsvg-view svg")).to_be_visible(timeout=120_000)
    expect(page.locator(".mpl-graph .mpl-stale")).to_have_count(0, timeout=120_000)
    # the first view keeps labels readable, so the box may be outside it: pan to it, as a
    # user drags the picture, then click it
    view = page.locator(".mpl-graph .mpl-gsvg-view")
    shot(view, "big_graph.png")

    def pan_to(node) -> None:
        """Drag the picture so that ``node`` is in the middle of the view."""
        view.scroll_into_view_if_needed()
        v, n = view.bounding_box(), node.bounding_box()
        assert v is not None and n is not None
        cx, cy = v["x"] + v["width"] / 2, v["y"] + v["height"] / 2
        page.mouse.move(cx, cy)
        page.mouse.down()
        page.mouse.move(
            cx - (n["x"] + n["width"] / 2 - cx), cy - (n["y"] + n["height"] / 2 - cy), steps=8
        )
        page.mouse.up()

    # a statement's box inside the loop: its row unfolded (the loop and the condition
    # around it opened), in view in the Call tab, its editors filled in
    inner = "call.programs[0].body[15].body[5].body[4]"
    node = page.locator(f".mpl-graph g.node[data-path='{inner}']")
    pan_to(node)
    node.click()
    opened = call.locator(".mpl-stmt-open", has_text="pl.semaphore_signal")
    expect(opened).to_have_count(1, timeout=20_000)
    expect(opened).to_be_in_viewport(timeout=20_000)
    expect(opened.locator(".mpl-sem input")).to_have_value("received")
    shot(opened, "big_stmt_unfolded.png")

    node = page.locator(".mpl-graph g.node[data-id='view:0.7.t0']")
    pan_to(node)
    shot(view, "big_graph_panned.png")
    node.click()
    editor = page.locator(".mpl-transform-editor")
    expect(editor).to_be_in_viewport(timeout=20_000)
    index = editor.locator(".mpl-tf-index input").first
    expect(index).to_have_value("pl.ds((dev + 0) % axis_size(dev) * 64, 64)")  # as Pallas
    index.fill("0:64")
    index.press("Enter")
    expect(editor).to_contain_text("f32[64,128]", timeout=20_000)
    expect(title).to_contain_text("valid")
    index.fill("0:64:2")
    index.press("Enter")
    expect(editor.locator(".mpl-refused")).to_have_count(1, timeout=20_000)
    expect(page.locator(".mpl-message")).to_contain_text("not set", timeout=20_000)
    expect(editor).to_contain_text("a step is not supported")
    shot(editor, "big_index_refused.png")
    index.fill("0:64")
    index.press("Enter")
    expect(editor.locator(".mpl-refused")).to_have_count(0, timeout=20_000)

    target = work / "nb" / "big.json"
    page.locator(".mpl-path input").fill(str(target))
    page.locator(".mpl-lab button", has_text="Save").first.click()
    expect(page.locator(".mpl-message")).to_contain_text("saved to", timeout=20_000)
    saved = json.loads(target.read_text())
    index_path = saved["call"]["programs"][0]["body"][7]["transforms"][0]["index"]
    assert index_path == [[0, 64]]
    shot(title, "big_saved.png")

    # a seed error: "Fix all" applies the best fixes, one undo step, to a valid scenario
    page.locator(".mpl-gallery select").select_option(label="dup-ref")
    expect(title).to_contain_text("JAX would reject this", timeout=60_000)
    page.locator("button.mpl-fix-all").click()
    expect(title).to_contain_text("✔ valid", timeout=60_000)
    steps = page.locator(".mpl-fix-all-steps")
    expect(steps).to_contain_text("MPMD_DUP_REF")
    expect(page.locator(".mpl-problems")).to_contain_text("no problems found")
    expect(page.locator(".mpl-graph .mpl-stale")).to_have_count(0, timeout=120_000)
    expect(page.locator(".mpl-graph g.node[data-id='output:out']")).to_be_visible()
    # another scenario's picture starts from its own first view (not the pan of the last)
    frame = view.bounding_box()
    for box in page.locator(".mpl-graph g.node").all():
        b = box.bounding_box()
        assert (
            frame and b and frame["x"] - 1 <= b["x"] <= frame["x"] + frame["width"] - b["width"] + 1
        )
    shot(title, "big_fix_all.png")
    fixed = work / "nb" / "dup-ref-fixed-by-all.json"
    page.locator(".mpl-path input").fill(str(fixed))
    page.locator(".mpl-lab button", has_text="Save").first.click()
    expect(page.locator(".mpl-message")).to_contain_text("saved to", timeout=20_000)
    from mpmd_lab.session import Session

    assert Session(str(fixed)).valid  # what was saved is the valid scenario on screen
    shot(title, "big_fix_all_saved.png")
