"""``fastmath()``: let the compiler fuse a multiply and an add into one instruction (FMA) and
reorder floating-point sums, throughout the function.

Every other step keeps each multiply and add rounded as the original rounds it, but for the
sums ``vectorize`` and ``parallel`` reorder in the loops they name. A loop nest that does
nothing but multiply-adds (a matrix product) then runs at half the rate the CPU has where
multiplies and adds share its vector units (Intel's: two FMA pipes that also do each add and
each multiply alone), since an FMA rounds once where the original rounds twice. This step is
the user's leave to round so (``loclab optimize --fast-math``): Numba's ``fastmath``
``contract`` and ``reassoc`` flags on the whole function, never those that assume no NaN or
infinity (the branch that runs as written where arguments share memory is in the same
function, and compiled so too). It changes no loop, so it is always legal; the results then
differ from the
original's within the bound of a reordered sum (``verify.reordered_length``), which is what
verification allows. Numba's emitter only: C and CUDA compilers take the same leave from
their command line (``-ffp-contract=fast -fassociative-math``; NVCC fuses by default).
"""

from __future__ import annotations

from loclab.transform.recipe import Step
from loclab.transform.steps import Applied, Context, expect_args, no_keywords
from loclab.transform.tree import Program

NAMES = ("fastmath",)


def apply(program: Program, step: Step, context: Context) -> Applied:
    expect_args(step, 0, 0, "fastmath()")
    no_keywords(step)
    new = program.clone()
    new.fast_math = True
    return Applied(new, "the compiler may fuse multiplies and adds (FMA: one rounding for "
                        "two) and reorder sums throughout the function: results within the "
                        "bound of a reordered sum")
