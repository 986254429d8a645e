"""The multi-seed learning summary's arithmetic, on fixed inputs worked out by hand."""

from __future__ import annotations

import math

import pytest

from episodelake.trainer import learning_stats as ls


def test_mean_interval_is_a_student_t_interval():
    found = ls.mean_interval([0.5, 0.6, 0.7, 0.8, 0.9])
    # mean 0.7, sample sd 0.158114, t(4) = 2.776 -> half width 2.776 * 0.158114 / sqrt(5) = 0.19630
    assert found.mean == pytest.approx(0.7)
    assert found.low == pytest.approx(0.7 - 0.196297, abs=1e-5)
    assert found.high == pytest.approx(0.7 + 0.196297, abs=1e-5)
    assert found.n == 5


def test_one_value_has_no_interval_and_large_samples_use_the_normal_quantile():
    single = ls.mean_interval([0.4])
    assert (single.mean, single.low, single.high) == (0.4, None, None)
    assert not single.above_zero
    assert ls.t95(1) == 12.706 and ls.t95(30) == 2.042 and ls.t95(200) == 1.960
    with pytest.raises(ValueError):
        ls.t95(0)
    with pytest.raises(ValueError):
        ls.mean_interval([])


def test_paired_difference_cancels_each_seeds_luck():
    gigpo = [0.80, 0.60, 0.90, 0.70, 0.50]
    grpo = [0.70, 0.50, 0.80, 0.60, 0.40]  # every seed 0.1 lower: no spread in the differences
    diff = ls.paired_difference(gigpo, grpo)
    assert diff.mean == pytest.approx(0.1)
    assert diff.low == pytest.approx(0.1) and diff.high == pytest.approx(0.1)
    assert diff.above_zero
    # unpaired, the seeds' spread (0.5..0.9) would swamp the same 0.1 gap
    assert ls.mean_interval(gigpo).low < ls.mean_interval(grpo).high

    mixed = ls.paired_difference([0.6, 0.5, 0.7], [0.5, 0.6, 0.6])  # +0.1, -0.1, +0.1
    assert mixed.mean == pytest.approx(0.1 / 3)
    assert not mixed.above_zero
    with pytest.raises(ValueError, match="equal counts"):
        ls.paired_difference([0.1, 0.2], [0.1])


def test_curve_measures():
    curve = [0.1, 0.3, 0.7, 0.775, 0.4, 0.25, 0.5, 0.6, 0.55, 0.5]
    assert ls.final(curve) == pytest.approx((0.25 + 0.5 + 0.6 + 0.55 + 0.5) / 5)
    assert ls.final(curve, last=1) == 0.5
    assert ls.first_above(curve, 0.6) == 2
    assert ls.first_above(curve, 0.9) is None
    assert ls.largest_fall(curve) == pytest.approx(0.775 - 0.25)  # the late collapse
    assert ls.largest_fall([0.1, 0.2, 0.3]) == 0.0
    assert ls.area([0.0, 1.0]) == pytest.approx(0.5)
    assert ls.area([0.2, 0.4, 0.6]) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        ls.area([0.5])


def test_moving_mean_separates_a_lucky_point_from_a_collapse():
    noisy = [0.6, 0.8, 0.55, 0.7, 0.6, 0.75, 0.6, 0.65]  # a 25-point dip after one lucky 80%
    assert ls.largest_fall(noisy) == pytest.approx(0.25)
    assert ls.moving_mean(noisy, 3) == pytest.approx([0.65, 0.683333, 0.616667, 0.683333, 0.65, 0.666667], abs=1e-6)
    assert ls.largest_fall(ls.moving_mean(noisy, 3)) < 0.07
    collapse = [0.7, 0.75, 0.8, 0.8, 0.75, 0.4, 0.3, 0.35, 0.3, 0.3]
    assert ls.largest_fall(ls.moving_mean(collapse, 3)) == pytest.approx(0.7833333 - 0.3166667, abs=1e-6)
    assert ls.moving_mean([0.5, 0.5], 5) == []
    with pytest.raises(ValueError, match="window"):
        ls.moving_mean(noisy, 0)


def test_per_iteration_bands_cut_to_the_shortest_run():
    bands = ls.per_iteration([[0.1, 0.5, 0.9], [0.3, 0.7]])
    assert len(bands) == 2
    assert bands[0].mean == pytest.approx(0.2) and bands[1].mean == pytest.approx(0.6)
    # two runs: t(1) = 12.706, sd of (0.1, 0.3) = 0.141421 -> half width 12.706 * 0.1 = 1.2706
    assert bands[0].high - bands[0].mean == pytest.approx(12.706 * 0.141421 / math.sqrt(2), abs=1e-4)
