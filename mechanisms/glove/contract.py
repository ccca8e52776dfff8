"""The mechanism contract's case for glove (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"k": 3}
