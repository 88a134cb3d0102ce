import pytest

from loclab.measure.stats import summarize


def test_summary_of_known_samples():
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.min, s.max, s.runs) == (3.0, 1.0, 5.0, 5)
    assert (s.q1, s.q3) == (2.0, 4.0)
    assert s.iqr == 2.0


def test_even_count_median_is_the_mean_of_the_middle_pair():
    assert summarize([4.0, 1.0, 3.0, 2.0]).median == 2.5


def test_single_sample_has_no_spread():
    s = summarize([0.25])
    assert (s.median, s.min, s.max, s.iqr, s.runs) == (0.25, 0.25, 0.25, 0.0, 1)


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        summarize([])
