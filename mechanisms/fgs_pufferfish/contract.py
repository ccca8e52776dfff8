"""The mechanism contract's case for fgs_pufferfish (tests/unit/test_mechanism_contract.py, docs/extending.md)."""

#: the parameters of its release on the contract's T-Drive sample
PARAMS = {"epsilon": 2.0, "n_slots": 48, "day_timezone": "Asia/Shanghai"}
#: (taxis, fixes per taxi) of its sample: FGS correlates whole days, of at least two objects with two valid days each
SAMPLE = (16, None)
#: the parameter a spec must give: an empty parameter mapping is refused naming it
REQUIRED = "epsilon"
