"""mpmd-lab widgets."""
