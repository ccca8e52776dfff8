"""Toy sets, a second mechanism package of docs/extending.md, of another shape (anonymity sets): ``adapter.py``,
``example.yaml`` and ``contract.py``; it states no DP-audit pair (its claim is not DP)."""
