"""The review report's plots: an attack whose interval touches its rate (rounding) still draws."""

from tasks.report import attack_plot


def test_attack_plot_accepts_an_interval_that_rounds_past_the_rate():
    rows = [{"attack": "a", "success_rate": 0.0, "ci_low": 1e-17, "ci_high": 0.01, "baseline": 0.0, "passed": True},
            {"attack": "b", "success_rate": 1.0, "ci_low": 0.9, "ci_high": 1.0 - 1e-16, "baseline": 0.1,
             "passed": False},
            {"attack": "c", "success_rate": None, "passed": False}]
    assert attack_plot(rows).startswith("data:image/png;base64,")
