"""The mechanism contract's case for kpsi_anonymity (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"k": 3, "road_aware": False, "psi_mode": "constant", "delta_m": 500.0}
#: the parameter a spec must give: an empty parameter mapping is refused naming it
REQUIRED = "road_network"
