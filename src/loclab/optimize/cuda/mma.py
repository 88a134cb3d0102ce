"""Products of doubles on the tensor cores: a register-tiled kernel whose staged loop only
accumulates ``acc[i, j] += f(i, k) * g(k, j)`` (gemm, syrk, a covariance's sums) runs each
strip of that loop as warp-wide ``mma.sync`` instructions instead of one fused multiply-add
per element per thread.

Why: on an H100/H200, ``mma.sync.m16n8k4.f64`` runs at twice the rate of the SIMT ``DFMA``
(65 against 33 TFLOP/s, measured on an H200), which is what cuBLAS's DGEMM, and so CuPy's
``A @ B``, runs on; no register tiling of scalar multiply-adds can pass half of it.

How the thread's iterations are laid out. A warp owns a tile of ``8 R_y`` x ``4 R_x``
iterations of the two grid loops (``R_y`` x ``R_x`` a thread, both even); lane ``4 g + t``
holds the accumulators of rows ``g`` and ``g + 8`` of each 16-row slice and columns ``2 t``
and ``2 t + 1`` of each 8-column slice, the layout of the instruction's ``C`` fragment. Its
``A`` fragment is ``f`` at rows ``g``, ``g + 8`` and ``k + t``, its ``B`` fragment ``g`` at
``k + t`` and column ``g`` of the slice: so the values each lane multiplies are the user's own
expressions, evaluated at other iterations of the same loops, from the tiles the block
staged. The layout is only a bijection of the block's iterations to its threads: every other
statement of the kernel runs per iteration as before, guarded the same way, and a partial
strip runs as scalar code. A sum of several products (syr2k) is one instruction per product.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from loclab.optimize.cuda.mapping import Config, NestMapping, planar
from loclab.nest.python import update_increment

MMA_K = 4  # the k extent of one instruction (m16n8k4)
# The lane's place, from the block's flat thread index ``tid``: its warp, its group of four
# lanes (``g``: a row of A and C, a column of B) and its place in the group (``t``).
LANE_NAMES = ("mma_warp", "mma_g", "mma_t")
MMA_HELPER = r"""
// D = A B + C for one warp: A 16 x 4, B 4 x 8, C 16 x 8, doubles (see optimize/cuda/mma.py).
// Lane 4 g + t holds a0 = A[g][t], a1 = A[g + 8][t], b = B[t][g], c0, c1 = C[g][2t, 2t + 1],
// c2, c3 = C[g + 8][2t, 2t + 1]. Before sm_80 (no FP64 tensor cores), the same by shuffles.
__device__ __forceinline__ void loclab_dmma(double& c0, double& c1, double& c2, double& c3,
                                            double a0, double a1, double b) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 "
               "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
               : "+d"(c0), "+d"(c1), "+d"(c2), "+d"(c3) : "d"(a0), "d"(a1), "d"(b));
#elif __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
               : "+d"(c0), "+d"(c1) : "d"(a0), "d"(b));
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
               : "+d"(c2), "+d"(c3) : "d"(a1), "d"(b));
#else
  const int lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31;
  const int g = lane >> 2, t = lane & 3;
  for (int q = 0; q < 4; ++q) {
    const double x0 = __shfl_sync(0xffffffffu, a0, g * 4 + q);
    const double x1 = __shfl_sync(0xffffffffu, a1, g * 4 + q);
    const double y0 = __shfl_sync(0xffffffffu, b, 8 * t + q);
    const double y1 = __shfl_sync(0xffffffffu, b, 8 * t + 4 + q);
    c0 += x0 * y0; c1 += x0 * y1; c2 += x1 * y0; c3 += x1 * y1;
  }
#endif
}
"""


@dataclass(frozen=True)
class Term:
    """One product of an accumulation: ``rows`` (the instruction's A: reads the grid loop on
    y, the accumulated loop, names every thread shares) times ``columns`` (its B: the grid
    loop on x instead of y), negated or not."""

    negate: bool
    rows: ast.expr
    columns: ast.expr


@dataclass(frozen=True)
class Product:
    """A loop whose body is the one update ``target += sum of terms``: an array element, or
    a scalar (a dot product summed in ``total``, stored after the loop)."""

    target: ast.Subscript | ast.Name
    terms: tuple[Term, ...]

    @property
    def name(self) -> str:
        """The array or the scalar updated."""
        target = self.target
        return target.id if isinstance(target, ast.Name) else target.value.id  # type: ignore

    @property
    def scalar(self) -> bool:
        return isinstance(self.target, ast.Name)

    def factors(self) -> list[ast.expr]:
        return [side for term in self.terms for side in (term.rows, term.columns)]


@dataclass(frozen=True)
class MmaLayout:
    """A thread's iterations in the fragments' layout: ``rows`` of the y loop and
    ``columns`` of the x loop a thread (even), ``warps_x`` warps side by side along x. Each
    method gives an offset in the block's span as C text."""

    rows: int
    columns: int
    warps_x: int

    def row(self, r: int) -> str:
        return (f"(mma_warp / {self.warps_x}) * {8 * self.rows} + "
                f"{(r // 2) * 16 + (r % 2) * 8} + mma_g")

    def column(self, c: int) -> str:
        return (f"(mma_warp % {self.warps_x}) * {4 * self.columns} + "
                f"{(c // 2) * 8 + c % 2} + 2 * mma_t")

    def b_column(self, n: int) -> str:
        """The column of the ``n``-th 8-column slice whose B fragment this lane holds."""
        return f"(mma_warp % {self.warps_x}) * {4 * self.columns} + {n * 8} + mma_g"


def layout_for(mapping: NestMapping, config: Config) -> MmaLayout | None:
    """The fragments' layout for ``config``, where it has one: tensor cores asked for, tiles
    staged, no loop split across threads, grid loops on x and y with even register tiles,
    threads along x a multiple of 4 and along y of 8 (whole warps tile the block), and any
    third grid loop one iteration a block."""
    axes = planar(mapping, config) if config.mma else None
    if axes is None:
        return None
    x, y = axes
    if config.tile[x] % 2 or config.tile[y] % 2 or config.block[x] % 4 \
            or config.block[y] % 8:
        return None
    return MmaLayout(config.tile[y], config.tile[x], config.block[x] // 4)


def shared_pad(extent: int) -> int:
    """Elements added to a tile's rows so that a fragment's reads (four rows of eight
    consecutive doubles, or eight rows of four, per half warp) hit 16 different bank pairs:
    rows ``4 (mod 16)`` elements apart."""
    return (4 - extent) % 16


def product(node: ast.For, y: str, x: str) -> Product | None:
    """The accumulation ``node``'s body is, where it is one (see module): one statement
    ``X[...] += e``, ``-=``, or ``X[...] = X[...] + e`` (or ``x``, a scalar, in place of
    ``X[...]``), ``e`` a sum of products each of whose
    factors reads at most one of the grid loops ``y`` and ``x`` (a divisor neither)."""
    body = [s for s in node.body if not isinstance(s, ast.Pass)]
    if len(body) != 1 or not isinstance(body[0], (ast.AugAssign, ast.Assign)):
        return None
    statement = body[0]
    target = statement.target if isinstance(statement, ast.AugAssign) else \
        statement.targets[0] if len(statement.targets) == 1 else None
    increment = update_increment(statement)
    if increment is None or not (isinstance(target, ast.Name) or isinstance(
            target, ast.Subscript) and isinstance(target.value, ast.Name)):
        return None
    sign, value = increment
    terms = []
    for negate, term in _terms(value, sign == "-"):
        sides = _sides(term, y, x)
        if sides is None:
            return None
        terms.append(Term(negate, *sides))
    return Product(target, tuple(terms))


def _terms(node: ast.expr, negate: bool) -> list[tuple[bool, ast.expr]]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return [*_terms(node.left, negate),
                *_terms(node.right, negate != isinstance(node.op, ast.Sub))]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _terms(node.operand, not negate)
    return [(negate, node)]


def _sides(term: ast.expr, y: str, x: str) -> tuple[ast.expr, ast.expr] | None:
    """(A's factor, B's factor) of one product: its factors on x to B, the others to A;
    None where a factor reads both loops."""
    rows: list[ast.expr] = []
    columns: list[ast.expr] = []
    divisors: list[ast.expr] = []
    for factor, divides in _factors(term, False):
        names = {n.id for n in ast.walk(factor) if isinstance(n, ast.Name)}
        if divides and names & {x, y} or {x, y} <= names:
            return None
        (divisors if divides else columns if x in names else rows).append(factor)
    return _product(rows, divisors), _product(columns, [])


def _factors(node: ast.expr, divides: bool) -> list[tuple[ast.expr, bool]]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and not divides:
        return [*_factors(node.left, False), *_factors(node.right, False)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and not divides:
        return [*_factors(node.left, False), (node.right, True)]
    return [(node, divides)]


def _product(factors: list[ast.expr], divisors: list[ast.expr]) -> ast.expr:
    out: ast.expr = factors[0] if factors else ast.Constant(1.0)
    for factor in factors[1:]:
        out = ast.BinOp(left=out, op=ast.Mult(), right=factor)
    for divisor in divisors:
        out = ast.BinOp(left=out, op=ast.Div(), right=divisor)
    return ast.fix_missing_locations(ast.copy_location(out, factors[0]) if factors else out)
