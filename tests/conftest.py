"""Shared pytest configuration: hypothesis profiles.

``ci`` (the default) has no per-example deadline, so a slow or busy machine
never fails a property test; ``dev`` runs fewer examples for quick loops.
Select with ``HYPOTHESIS_PROFILE=dev``.
"""
import os

from hypothesis import settings

settings.register_profile("ci", deadline=None)
settings.register_profile("dev", deadline=None, max_examples=20)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
