"""The mechanism contract's case for prefix_tree (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"epsilon": 1.0, "height": 4, "max_records_per_object": 7}
