"""mpmd-lab: build, check, run and draw Pallas mpmd_map kernel calls."""


def __getattr__(name: str):
    """``mpmd_lab.plot_aliasing`` without importing matplotlib until it is used."""
    if name == "plot_aliasing":
        from mpmd_lab.plot import plot_aliasing

        return plot_aliasing
    raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
