"""Run a Great Expectations suite kept as JSON in ``expectations/`` on a pandas frame (GX 1.x, ephemeral)."""

from __future__ import annotations

import pandas as pd


def run_suite(suite: dict, df: pd.DataFrame, parameters: dict, result_format: dict | str = "SUMMARY"):
    """Validate ``df`` with ``suite`` (``{"name", "expectations": [{"type", "kwargs", "meta"}]}``), the
    ``$PARAMETER`` placeholders filled from ``parameters``; returns GX's validation result."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (context.data_sources.add_pandas("frame").add_dataframe_asset("rows")
             .add_batch_definition_whole_dataframe("whole"))
    configs = [ExpectationConfiguration(type=e["type"], kwargs=e["kwargs"], meta=e["meta"])
               for e in suite["expectations"]]
    gx_suite = context.suites.add(gx.ExpectationSuite(name=suite["name"],
                                                      expectations=[c.to_domain_obj() for c in configs]))
    # Batch.validate, not a ValidationDefinition's run: that also stores the result in the context's results
    # store (a deep copy and a serialisation of every unexpected index), which took 2/3 of a 1 M-row partition's
    # validation (bench/RESULTS.md, finding 1); the results are the same
    return batch.get_batch(batch_parameters={"dataframe": df}).validate(
        gx_suite, expectation_parameters=parameters, result_format=result_format)
