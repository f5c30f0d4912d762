def test_inline_figures_are_readable_at_a_notebook_column():
    """Shown inline (100 dpi) in a 1,000 px column, node text is at least 11 px: past
    the column's width the device panel goes under the graph instead of beside it."""
    for name in ("ring-shift", "peer-then-multicast", "multicast-2d", "dup-ref"):
        fig = plot.plot_aliasing(gallery.load(name))
        shrink = min(1.0, 1000 / (fig.get_size_inches()[0] * 100))
        node_texts = [
            t.get_fontsize()
            for t in fig.findobj(matplotlib.text.Text)
            if t.get_text() in {"args[0]", "x_ref"}
        ]
        assert node_texts, name
        assert min(node_texts) * 100 / 72 * shrink >= 10.9, (name, node_texts, shrink)
