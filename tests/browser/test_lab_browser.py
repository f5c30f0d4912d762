"""The Lab in JupyterLab, by clicks in Chromium: pass the Ref a second time, see
MPMD_DUP_REF flagged on the row and as a card, apply the fix, run, read the outputs;
then open peer-then-multicast, see its failing step highlighted, apply the fix."""

from __future__ import annotations

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
    page.locator(".mpl-problems button.mpl-fix").click()
    expect(problems).to_contain_text("no problems found")
    expect(page.locator(".mpl-transform-editor .mpl-step-bad")).to_have_count(0)
