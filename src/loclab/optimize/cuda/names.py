"""The function's names that CUDA C would misread, renamed before its nests become kernels.

Why: the kernels are written from the user's statements with the user's names, so a
parameter called ``new`` (a stencil's ``old`` and ``new`` grids), ``long`` or ``this`` is a
C++ keyword in the kernel's signature, and a local called ``tid`` or ``ok`` is declared twice
beside the names the kernel writer declares. Each such name gets ``_u`` appended (more
where that is taken), everywhere in the function, its parameters included; every other
token stays where it was, so line numbers still name the user's file. The module's
function then takes the renamed parameters (in the same order); the output says which.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from loclab.optimize.temporaries import function_named, spliced

# C++ keywords and alternative tokens that are Python identifiers, and CUDA's built-ins
RESERVED = frozenset("""
    alignas alignof and_eq asm auto bitand bitor bool case catch char char8_t char16_t
    char32_t compl concept const consteval constexpr constinit const_cast co_await co_return
    co_yield decltype default delete do double dynamic_cast enum explicit export extern float
    friend goto inline int long mutable namespace new noexcept not_eq nullptr operator or_eq
    private protected public register reinterpret_cast requires restrict short signed sizeof
    static static_assert static_cast struct switch template this thread_local throw typedef
    typeid typename union unsigned using virtual void volatile wchar_t xor_eq
    threadIdx blockIdx blockDim gridDim warpSize
    tid ok bx by bz
""".split())
# names the kernel writer declares whatever the function: its lanes' places and the
# registers a strip's reads are hoisted into (``h3``, which would hide a user's ``h3``)
WRITERS = re.compile(r"^(ok|mma|loclab)_|^h\d+$")


@dataclass(frozen=True)
class Renamed:
    """One name the kernels could not use as written, and the one they use."""

    name: str
    new: str

    def text(self) -> str:
        return (f"{self.name} is called {self.new} in the GPU code (a C++ keyword, or a name "
                "the kernels declare)")


def c_safe_names(source: str, function: str) -> tuple[str, tuple[Renamed, ...]]:
    """``source`` with the names of ``function`` that CUDA C would misread renamed (see the
    module), and those names; ``source`` itself where there are none."""
    found = function_named(source, function)
    if found is None:
        return source, ()
    nodes = [n for n in ast.walk(found) if isinstance(n, (ast.Name, ast.arg))]
    names = {n.id if isinstance(n, ast.Name) else n.arg for n in nodes}
    # the function's own names: its parameters and what it assigns (a name it only reads,
    # ``int`` in ``int(x)``, ``np``, is a builtin or a module's)
    bound = {n.arg for n in nodes if isinstance(n, ast.arg)} | {
        n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loops = {n.target.id for n in ast.walk(found)
             if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}
    renames: dict[str, str] = {}
    for name in sorted(bound):
        if name in RESERVED or WRITERS.search(name) or _made_from(name, bound, loops):
            new = f"{name}_u"
            while new in names or new in renames.values():
                new += "_u"
            renames[name] = new
    if not renames:
        return source, ()
    named = [(n, n.id if isinstance(n, ast.Name) else n.arg) for n in nodes]
    edits = [(n.lineno, n.col_offset, n.col_offset + len(name), renames[name])
             for n, name in named if name in renames]
    return spliced(source, edits), tuple(Renamed(k, v) for k, v in renames.items())


def _made_from(name: str, bound: set[str], loops: set[str]) -> bool:
    """Whether the kernel writer may make ``name`` from another of the function's names: a
    loop's strip variable (``k0``), its place in the block (``t_i``, ``first_i``,
    ``count_i``), a copy of a register tile (``i_0``, ``s_1_0``), an array's extent, tile,
    prefetch or register (``A_n0``, ``s_A``, ``p_A_0``, ``r_C_0_0``), a copy made before the
    kernel (``B_copy``), a scalar's value on entry (``beta_in``) or its sum across the grid
    (``total_sum``, ``total_part``), a fragment's column (``j_mma0``)."""
    if name[:-1] in loops and name.endswith("0"):
        return True
    prefix = re.match(r"(t|first|count|s|p|r)_(\w+?)(_\d+)*$", name)
    if prefix and prefix[2] in bound:
        return True
    stem = re.match(r"(\w+?)(_\d+)+$|(\w+?)_n\d+$|(\w+?)_(copy|in|sum|part)$|(\w+?)_mma\d+$", name)
    return stem is not None and next(g for g in stem.groups() if g) in bound
