"""pytest configuration shared by the test suite.

Triton kernels run on the CPU through Triton's interpreter: TRITON_INTERPRET must be set before
triton is first imported, so it is set here, at collection time, before any test module loads.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
# The graph cache would let a test reuse a module another test compiled under different monkeypatched
# internals (forced tilings, patched codegen); tests compile fresh, and tests/test_graph_cache.py
# switches the cache on where it is the subject.
os.environ.setdefault("TILEFUSE_GRAPH_CACHE", "0")

try:
    from hypothesis import HealthCheck, settings

    # "ci" keeps each test's own max_examples but never fails on timing (a loaded 2-core machine).
    settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass
