"""mpmd-lab widgets: edit a scenario visually, see its problems and graph, run it.

``Lab()`` / ``Lab("gallery name")`` / ``Lab(path)`` is the whole UI; it views and
edits a :class:`mpmd_lab.Session`.
"""

from mpmd_lab.widgets.lab import Lab

__all__ = ["Lab"]
