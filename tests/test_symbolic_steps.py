"""Loops that step by a size (``range(lo, hi, inc)``, C's ``i += inc``), against the
brute-force oracle: analyzed over every value between the bounds, the verdicts are safe for
every step of the assumed sign (Python: both signs, ``counting_down``), and a dependence
marked exact happens in some run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loclab
from loclab.errors import UsageError
from tests.nestgen import oracle
from tests.test_deps_oracle import PROPERTY, analyzer_deps, problems, report, union

OFFSET = st.integers(-2, 2)


@st.composite
def strided_nests(draw: st.DrawFn) -> tuple[str, bool]:
    """(source, counting down) of ``f(A, B, N, inc)`` with a loop stepping by ``inc``."""
    down = draw(st.booleans())
    header = "range(N - 1, -1, inc)" if down else draw(st.sampled_from(
        ["range(0, N, inc)", "range(1, N - 1, inc)", "range(2, N, inc)"]))
    lines = ["def f(A, B, N, inc):", f"    for i in {header}:"]
    inner = draw(st.booleans())
    body_indent = "        "
    if inner:
        lines.append("        for j in range(3):")
        body_indent = "            "
    for _ in range(draw(st.integers(1, 2))):
        target = f"A[i + {draw(OFFSET)}]" if not inner else f"A[i + {draw(OFFSET)}][j]"
        scaled = draw(st.integers(-1, 2))
        source = f"A[i + {scaled} * inc + {draw(OFFSET)}]" if not inner else \
            f"A[i + {scaled} * inc + {draw(OFFSET)}][j]"
        lines.append(f"{body_indent}{target} = {source} + B[i]")
    return "\n".join(lines) + "\n", down


def runs(source: str, signs: range) -> list:
    return [oracle(source, {"N": n, "inc": inc}) for n in (5, 8) for inc in signs]


@settings(PROPERTY, max_examples=60)
@given(case=strided_nests())
def test_symbolic_steps_are_safe_and_exact_where_they_say(case: tuple[str, bool]) -> None:
    source, down = case
    analysis = loclab.analyze(source, assume_distinct=True)
    for verdicts, signs in ((analysis, range(1, 4)), (analysis.counting_down, range(-3, 0))):
        assert verdicts is not None
        truth = union(runs(source, signs))
        found = problems(truth, verdicts, exact=False)
        line = {s.id: s.line for s in verdicts.statements}
        exact = {dep for dep in analyzer_deps(verdicts)
                 if any(d.exact and line[d.source] == dep.source and line[d.sink] == dep.sink
                        and d.kind == dep.kind and tuple(dep.vector) in d.vectors()
                        for d in verdicts.dependences)}
        if down == (signs.start < 0):  # the sign the loop's bounds run with at sizes >= 1
            found += [f"marked exact but no run has it: {dep}" for dep in exact - truth.deps]
        assert not found, report(source, f"inc in {signs}", found, verdicts)


def test_the_tsvc_shapes() -> None:
    c = """\
#define LEN 64
void s175(float *restrict a, float *restrict b, int inc) {
    for (int i = 0; i < LEN-1; i += inc)
        a[i] = a[i + inc] + b[i];
}
void s172(float *restrict a, float *restrict b, int n1, int n3) {
    for (int i = n1-1; i < LEN; i += n3)
        a[i] += b[i];
}
void zero(float *a, int inc, int n) {
    for (int i = 0; i != n; i += inc)
        a[i] = 0;
}
"""
    s175 = loclab.analyze(c, "s175", language="c")
    (d,) = s175.dependences
    assert (d.kind, d.direction, d.distance, d.exact) == ("WAR", ("<",), (1,), True)
    assert any("inc >= 1" in note for note in s175.notes)
    assert loclab.analyze(c, "s172", language="c").loops[0].parallel
    with pytest.raises(UsageError, match="needs a condition i < bound or i > bound"):
        loclab.analyze(c, "zero", language="c")


def test_transform_and_optimize_refuse_a_step_that_is_a_size(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from loclab.cli import main

    path = tmp_path / "k.py"
    path.write_text("def f(a, n, inc):\n    for i in range(0, n, inc):\n        a[i] = 0\n")
    for command in (["transform", f"{path}::f", "--apply", "parallel(i)"],
                    ["optimize", f"{path}::f"]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith("k.py:2: loop i steps by inc, a size: loclab transforms loops of "
                            "a constant step only (loclab analyze explains this one)")
    assert main(["analyze", str(path)]) == 0
    assert "Loops if inc < 0" in capsys.readouterr().out
