"""Testing helpers shipped with tilefuse (imported only by tests and scripts, never by the backend).

``tilefuse.testing.opinfo``: the OpInfo sweep, which compiles every op of torch's OpInfo database
with tilefuse and compares with eager (``tests/test_opinfo.py``, ``scripts/op_coverage.py``).
"""
