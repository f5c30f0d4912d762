"""mpmd-lab: build, check, run and draw Pallas mpmd_map kernel calls."""
