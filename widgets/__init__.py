"""mpmd-lab widgets: edit a scenario visually, see its problems and graph, run it.

``Lab()`` / ``Lab("gallery name")`` / ``Lab(path)`` is the whole UI.
"""

from widgets.lab import Lab
from widgets.state import LabState

__all__ = ["Lab", "LabState"]
