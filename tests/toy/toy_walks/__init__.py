"""Toy walks, a mechanism package of docs/extending.md: ``adapter.py`` (the mechanism), ``example.yaml`` (its
example spec), ``contract.py`` (the mechanism contract's parameters), ``dp_audit.py`` (its DP-audit pair)."""
