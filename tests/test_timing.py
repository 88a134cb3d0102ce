from loclab.measure.timing import SLOW_RUNS, Budget, PerfCounterClock, measure


class FakeClock:
    """Reports a fixed time per call and counts the calls it made."""

    name = "fake"

    def __init__(self, seconds_per_call):
        self.seconds = seconds_per_call
        self.calls = 0
        self.batches = []

    def per_call(self, run, calls):
        for _ in range(calls):
            run()
        self.calls += calls
        self.batches.append(calls)
        return self.seconds


def test_minimum_runs_are_kept_even_with_no_budget():
    samples, batch = measure(lambda: None, FakeClock(0.5), Budget(seconds=0.0, min_runs=4))
    assert len(samples) == 4 and batch == 1


def test_maximum_runs_bound_the_loop():
    samples, _ = measure(lambda: None, FakeClock(0.01),
                         Budget(seconds=60.0, min_runs=1, max_runs=7))
    assert len(samples) == 7


def test_short_runs_are_timed_in_batches():
    clock = FakeClock(1e-5)
    samples, batch = measure(lambda: None, clock,
                             Budget(seconds=0.0, min_runs=3, min_sample_s=1e-3))
    assert batch == 100
    assert clock.batches == [1, 1, 100, 100, 100]


def test_perf_counter_clock_runs_the_function_each_time():
    calls = []
    seconds = PerfCounterClock().per_call(lambda: calls.append(1), 5)
    assert len(calls) == 5 and seconds >= 0


def test_long_runs_after_validation_cost_no_extra_call():
    clock = FakeClock(0.9)
    samples, batch = measure(lambda: None, clock, Budget(seconds=0.0, min_runs=5),
                             warmed_up=True)
    assert len(samples) == 5 and batch == 1 and clock.calls == 5


def test_calls_of_seconds_are_timed_three_times():
    clock = FakeClock(2.0)
    samples, _ = measure(lambda: None, clock, Budget(seconds=0.0, min_runs=5),
                         warmed_up=True)
    assert len(samples) == SLOW_RUNS == clock.calls


def test_a_call_past_the_give_up_time_is_the_only_sample():
    """A candidate one call of which is slower than the fastest allows loses anyway: its
    warm-up call ends the timing; below that time, the budget runs as usual."""
    slow = FakeClock(0.5)
    assert measure(lambda: None, slow, Budget(seconds=0.0, min_runs=5),
                   give_up_past=0.1) == ([0.5], 1)
    assert slow.calls == 1
    fast = FakeClock(0.05)
    samples, _ = measure(lambda: None, fast, Budget(seconds=0.0, min_runs=5),
                         give_up_past=0.1)
    assert len(samples) == 5
