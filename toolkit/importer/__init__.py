"""Read a real JAX function's kernel call into a scenario (``mpmd_lab.from_jax``).

:mod:`.api` (``from_jax``, ``Imported``), :mod:`.call` (the call inside the traced
function: mesh, specs, buffers), :mod:`.kernel` (the kernel's jaxpr as statements),
:mod:`.values` (index expressions with bounds), :mod:`.frames` (the user's lines),
:mod:`.child` (an import in a child process, for the command line), :mod:`.magic`
(``%load_ext mpmd_lab`` and ``%%mpmd_lab``).
"""

from __future__ import annotations

from mpmd_lab.importer.api import DEFAULT_TIMEOUT, Imported, ImportTimeout, Result, from_jax

__all__ = ["DEFAULT_TIMEOUT", "ImportTimeout", "Imported", "Result", "from_jax"]
