"""Hypothesis profiles (a pytest plugin loaded by conftest.py) and the ``fuzz`` marker.

``make test`` uses the short ``default`` profile; ``make fuzz`` sets
``HYPOTHESIS_PROFILE=long`` and runs only ``-m fuzz`` tests, many more examples each.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config):
    config.addinivalue_line("markers", "fuzz: hypothesis fuzzing (long run: make fuzz)")


def pytest_collection_modifyitems(config, items):
    """Under the long profile a fuzz test may run past pytest-timeout's default."""
    import pytest

    if os.environ.get("HYPOTHESIS_PROFILE") == "long":
        for item in items:
            if item.get_closest_marker("fuzz"):
                item.add_marker(pytest.mark.timeout(3600))
