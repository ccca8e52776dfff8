"""The mechanism contract's case for fastpub (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"k": 2, "epsilon": 10.0, "l_max": 2, "max_records_per_object": 7}
#: the parameter a spec must give: an empty parameter mapping is refused naming it
REQUIRED = "k"
