"""The mechanism contract's case for dpt (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"epsilon": 5.0, "max_records_per_object": 7}
