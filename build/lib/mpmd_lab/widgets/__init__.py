"""mpmd-lab widgets: edit a scenario visually, see its problems and graph, run it.

``Lab()`` / ``Lab("gallery name")`` / ``Lab(path)`` is the whole UI.
"""

from mpmd_lab.widgets.lab import Lab
from mpmd_lab.widgets.state import LabState

__all__ = ["Lab", "LabState"]
