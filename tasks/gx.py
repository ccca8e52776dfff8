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
    vd = context.validation_definitions.add(gx.ValidationDefinition(name=suite["name"], data=batch, suite=gx_suite))
    return vd.run(batch_parameters={"dataframe": df}, expectation_parameters=parameters,
                  result_format=result_format)
