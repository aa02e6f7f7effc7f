from results.report import tables


def test_errors_are_counted_against_the_prediction_target():
    target = tables.PREDICTION_TARGET
    line = tables.errors_line([target - 0.001, -(target + 0.001), None, 0.02])
    assert line == (f"Largest error over the shaped points: {(target + 0.001) * 100:.1f}% "
                    f"(2/3 within ±{target * 100:g}%).")
    assert tables.errors_line([None], "the cells") is None
    assert tables.errors_line([-0.05], "the cells").startswith("Largest error over the cells: 5.0%")
