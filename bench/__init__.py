"""``python -m bench`` (``make bench``): measured speed, as ratios side by side.

Not part of ``make test``. Each section is one module with one job; a section whose
module is missing prints ``n/a (module missing)`` instead of failing the run.
"""
