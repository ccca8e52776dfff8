"""The mechanism contract's case for klt (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"k": 3, "pois": {"synthetic": {"n": 40_000, "categories": 6}}}
#: the parameter a spec must give: an empty parameter mapping is refused naming it
REQUIRED = "pois"
