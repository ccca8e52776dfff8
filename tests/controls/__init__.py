"""Positive controls of the audit gate: test-only mechanisms that leak on purpose (real records copied into a
synthetic release, or every raw record replayed as synthetic). They are not in :data:`mechanisms.registry.REGISTRY`, so
no release spec can name them; the tests and ``bench/gate_validity.py`` run them directly."""
