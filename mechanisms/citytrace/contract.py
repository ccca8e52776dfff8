"""The mechanism contract's case for citytrace (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"epsilon": 5.0, "n_synthetic": 60}  # the noisy count of so few records (scale 120) may be 0
