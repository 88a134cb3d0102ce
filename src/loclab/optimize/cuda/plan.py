"""Which loops of each top-level nest become GPU threads, proved legal by the transformer.

For the band at the top of a nest, the orders tried are the band as written and every legal
order of it (``loclab analyze``'s interchange options; only where the band's bounds do not
depend on its own loops, so that its loops can be nested in any order as written); for each
order, its leading one, two or three loops as the grid, most loops first. A grid is kept when
the transformer accepts the recipe ``privatize`` of every scalar the nest assigns (on a GPU
each thread keeps its scalars in registers: they must be private to one grid iteration),
``permute`` to the order and ``parallel`` of each grid loop: then no dependence crosses two
threads. A scalar the whole grid reduces (``total += ...``, ``err = max(err, ...)``: a
reduction of the outermost grid loop, not privatized) is summed by each thread in a register,
by each block with shuffles and shared memory, and into one device copy atomically
(``NestMapping.sums``, ``cuda.sums``); array elements updated with ``+``, ``-``, ``min`` or
``max`` from many iterations (a generalized reduction) get atomic updates.
Other reductions across the grid are refused. A nest with no such grid runs in one thread, as
written, with the dependences that keep each loop sequential as the reason.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from loclab.deps.analysis import Analysis
from loclab.nest.ir import Loop
from loclab.optimize.build import Source, _refusals, refusal
from loclab.optimize.cuda.facts import assigned, block_role, promotable, written_arrays
from loclab.optimize.cuda.mapping import CopiedReads, NestMapping
from loclab.optimize.cuda.sums import GRID_COMBINE
from loclab.optimize.locality import array_accesses, stride
from loclab.optimize.planner import (Context, _band_at, _options, label, privatize_step,
                                     sequential_reason, top_loops)
from loclab.transform.recipe import Step, make_step

MAX_GRID = 3


def gpu_mappings(source: Source, context: Context, loops: dict[int, Any]
                 ) -> tuple[list[NestMapping], list[list[tuple[str, str]]]]:
    """The first grid the transformer accepts for every top-level nest, nest after nest
    (each proof includes the steps kept for the nests before it), and per nest the grids
    refused on the way with the transformer's reason. A top loop no grid holds whose body is
    loops alone (a stencil's time steps) stays on the host: each of its iterations launches
    the kernels of the nests inside it, mapped the same way (``host_nests``)."""
    done: list[Step] = []
    kept: list[NestMapping] = []
    refused_all: list[list[tuple[str, str]]] = []
    for top in top_loops(context.analysis):
        mapping, refused, steps = _map_nest(source, context, loops, top, done)
        band = _band_at(context.analysis, top)
        apart = None
        if len(mapping.grid) == 1:
            apart = distributed_nests(source, context, loops, top, done,
                                      pieces=bool(mapping.atomics))
        elif 1 < len(band) < MAX_GRID and mapping.grid == band and not mapping.atomics:
            apart = distributed_nests(source, context, loops, top, done, lead=band)
        if apart is not None:
            for inner, inner_steps in apart:
                done += inner_steps
                kept.append(inner)
                refused_all.append(refused)
            continue
        if not mapping.grid:
            inside = host_nests(source, context, loops, top, done)
            if inside is not None:
                for inner, inner_refused, inner_steps in inside:
                    done += inner_steps
                    kept.append(inner)
                    refused_all.append(refused + inner_refused)
                continue
            mapping, steps = one_block(source, context, loops, top, done, mapping)
        done += steps
        kept.append(mapping)
        refused_all.append(refused)
    return kept, refused_all


def _map_nest(source: Source, context: Context, loops: dict[int, Any], top: Loop,
              done: list[Step]) -> tuple[NestMapping, list[tuple[str, str]], list[Step]]:
    """The first grid the transformer accepts for the nest at ``top`` after the steps
    ``done`` (one without atomic updates first), the grids refused on the way, and the
    steps that prove it (none: one thread runs the nest)."""
    refused: list[tuple[str, str]] = []
    with_atomics = None
    for order, grid in _candidates(context.analysis, top):
        reduced = _grid_reduced(context, grid)
        steps = _steps(context.analysis, top, order, grid, _copied_arrays(context, grid),
                       reduced)
        try:
            result = source.transform([*done, *steps], emit=PROOF)
        except _refusals() as err:
            refused.append((_grid_text(grid), refusal(err)))
            continue
        atomics, sums, problem = _reductions(result.program, grid, scalars=reduced)
        if problem:
            refused.append((_grid_text(grid), problem))
            continue
        if atomics or sums:  # kept only where no grid without atomic updates holds
            with_atomics = with_atomics or (order, grid, atomics, sums, steps)
            continue
        mapping = _with_copies(_mapping(context, top, order, grid, atomics, tuple(steps),
                                        loops), _copies(result.program, top))
        mapping, steps = _with_split(source, context, mapping, [*done, *steps], steps, loops)
        mapping, steps = _rows_by_blocks(source, context, loops, mapping, [*done, *steps],
                                         steps)
        return mapping, refused, steps
    if with_atomics is not None:
        order, grid, atomics, sums, steps = with_atomics
        return _mapping(context, top, order, grid, atomics, tuple(steps), loops, sums), \
            refused, steps
    return _sequential(context, top, loops), refused, []


def distributed_nests(source: Source, context: Context, loops: dict[int, Any], top: Loop,
                      done: list[Step], pieces: bool = False,
                      lead: tuple[Loop, ...] | None = None
                      ) -> list[tuple[NestMapping, list[Step]]] | None:
    """The nests inside ``top`` each as a kernel of its own, ``top`` distributed over them
    and leading each one's grid (gemm's ``C[i, j] *= beta`` before its ``k, j`` loops: a
    grid over ``i`` alone becomes grids over ``i, j`` in two kernels launched one after the
    other), where the transformer proves ``distribute`` of ``top`` keeping them in program
    order and every nest gets a grid of two loops or more; else None. A distributed loop is
    named by a line of its nest (``i@5``). With ``lead`` (a perfect band from ``top``), the
    nests inside its last loop, the band leading each grid (a batch of gemm's: ``b, i`` over
    the zeroing of ``C[b, i, :]`` and its ``k, j`` loops become ``b, i, j`` twice); then
    every nest must get a deeper grid than the band, and statements beside the nests keep
    them fused.

    Statements beside the nests are kernels over ``top`` (correlation's ``corr[i, i] =
    1.0`` before its ``j, k`` loops). With ``pieces`` (the fused nest would
    update arrays atomically from many threads), a nest that gets no grid of two loops may
    get ``top`` or its own loop as a one-loop grid with the other loop split across threads
    (``_split_pieces``: atax's ``tmp[i] = 0``, row sum into ``tmp[i]`` and column sum into
    ``y[j]``, three kernels without atomics)."""
    lead = lead or (top,)
    split = lead[-1]
    children = split.body
    if len(children) < 2 or not any(isinstance(child, Loop) for child in children):
        return None
    if len(lead) > 1 and not all(isinstance(child, Loop) for child in children):
        return None
    # the band's last loop distributed, then each loop around it (every nest a band of
    # its own from the top)
    distribute = [make_step("distribute", label(loop)) for loop in reversed(lead)]
    try:
        result = source.transform([*done, *distribute], emit=PROOF)
    except _refusals():
        return None
    lines = [child.statements()[0].line if isinstance(child, Loop) else child.line
             for child in children if not isinstance(child, Loop) or child.statements()]
    firsts = [min(u.line for u in node.units()) for node in result.program.loops()
              if node.origin.line == split.line and node.origin.var == split.var]
    if len(lines) != len(children) or firsts != lines:
        return None  # distribution reordered the nests: kept fused
    found: list[tuple[NestMapping, list[Step]]] = []
    proved = [*done, *distribute]
    for child, line in zip(children, lines):
        if not isinstance(child, Loop):
            mapped = [_statement_piece(source, context, loops, top, child, proved)]
        else:
            mapped = [_distributed_nest(source, context, loops, lead, child, line, proved)]
            if len(lead) > 1 and mapped[0] is not None \
                    and len(mapped[0][0].grid) <= len(lead):
                return None  # the band's own grid, as fused: nothing gained
            if mapped[0] is None and pieces and len(lead) == 1:
                mapped = _split_pieces(source, context, loops, top, child, line, proved)
        if not mapped or None in mapped:
            return None
        for mapping, steps in mapped:
            proved += steps
            if not found:  # the first nest's proof holds the distribution
                mapping, steps = replace(mapping, steps=(*distribute, *mapping.steps)), \
                    [*distribute, *steps]
            found.append((mapping, steps))
    return found


def _distributed_nest(source: Source, context: Context, loops: dict[int, Any],
                      lead: tuple[Loop, ...], child: Loop, line: int, done: list[Step]
                      ) -> tuple[NestMapping, list[Step]] | None:
    """The first grid of two or more loops, the band ``lead`` first, that the transformer
    accepts for ``child`` after ``done`` (the band's last loop distributed, the nests before
    mapped), and the steps that prove it."""
    def at(loop: Loop) -> str:
        return f"{loop.var}@{line}"

    top = lead[-1]
    band = _band_at(context.analysis, child)
    scalars = sorted({a.variable.name for s in child.statements() for a in s.accesses
                      if a.write and not a.variable.is_array})
    for order, grid in _candidates(context.analysis, child):
        grid = (*lead, *grid[:MAX_GRID - len(lead)])
        permute = make_step("permute", *(at(loop) for loop in (*lead, *order))) \
            if order != band[:len(order)] else None
        steps = [privatize_step(context.analysis.nest, name, child) for name in scalars]
        steps += [permute] if permute else []
        steps += [make_step("parallel", at(loop)) for loop in grid]
        try:
            result = source.transform([*done, *steps], emit=PROOF)
        except _refusals():
            continue
        atomics, problem = _atomics(result.program, grid, line)
        if problem or atomics:
            continue
        mapping = _mapping(context, child, (*lead, *order), grid, atomics, tuple(steps),
                           loops)
        leading = ", ".join(loop.var for loop in lead)
        why = (f"distribute({label(top)})", f"{top.var}'s body is nests of their own: each "
               f"a kernel, {leading} leading its grid (the transformer proved "
               f"distribute({label(top)}), the nests in program order)")
        reasons = [r for r in mapping.reasons if not r[0].startswith("permute(")]
        if permute:
            reasons.insert(1, (str(permute), "the grid loops first, in a legal order"))
        return replace(mapping, reasons=(why, *reasons)), steps
    return None


def _statement_piece(source: Source, context: Context, loops: dict[int, Any], top: Loop,
                     statement: Any, done: list[Step]
                     ) -> tuple[NestMapping, list[Step]] | None:
    """A statement of ``top``'s body (``top`` distributed) as a kernel of its own, a thread
    per iteration of ``top``, where the transformer proves that loop parallel around it
    without atomic updates and it assigns no scalar (a later kernel could not read it)."""
    if any(a.write and not a.variable.is_array for a in statement.accesses):
        return None
    name = f"{top.var}@{statement.line}"
    step = make_step("parallel", name)
    try:
        result = source.transform([*done, step], emit=PROOF)
    except _refusals():
        return None
    atomics, problem = _atomics(result.program, (top,), statement.line)
    if problem or atomics:
        return None
    syntax = _syntax_of(loops, top, top, statement.line)
    if syntax is None:
        return None
    reasons = (_pieces_reason(top),
               (f"threads over {name}", f"{statement.source}: the transformer proved "
                f"parallel({name})"),
               (f"threadIdx.x on {name}", "the only grid loop"))
    return NestMapping(top, syntax, (top,), (top,), top, frozenset(), (step,), reasons,
                       part=syntax), [step]


def _split_pieces(source: Source, context: Context, loops: dict[int, Any], top: Loop,
                  child: Loop, line: int, done: list[Step]
                  ) -> list[tuple[NestMapping, list[Step]] | None]:
    """A nest ``child`` of one loop inside ``top`` (distributed) as kernels whose grid is
    one of the two loops and whose threads split the other (``_with_split``): ``top`` on the
    grid and a row sum split across a warp, or ``child``'s loop on the grid (moved out:
    ``permute``) and a column sum split across the block's rows. Where ``child`` holds
    several statements (bicg's column sum into ``s[j]`` beside its row sum into ``q[i]``),
    it is distributed too, and ``top`` again over the loops that gives: a kernel each."""
    if len(_band_at(context.analysis, child)) != 1 or any(
            isinstance(node, Loop) for node in child.body):
        return []
    statements = child.statements()
    steps: list[Step] = []
    if len(statements) > 1:
        steps = [make_step("distribute", f"{child.var}@{line}"),
                 make_step("distribute", f"{top.var}@{line}")]
        try:
            source.transform([*done, *steps], emit=PROOF)
        except _refusals():
            return []
    found: list[tuple[NestMapping, list[Step]] | None] = []
    proved = [*done, *steps]
    for statement in statements:
        part = _syntax_of(loops, top, child, statement.line) if len(statements) > 1 else None
        if len(statements) > 1 and part is None:
            return []
        mapped = _split_piece(source, context, loops, top, child, statement.line, proved,
                              part)
        if mapped is not None:
            mapping, piece_steps = mapped
            proved += piece_steps
            if not found and steps:  # the first kernel's proof holds the distribution
                mapped = replace(mapping, steps=(*steps, *mapping.steps)), \
                    [*steps, *piece_steps]
        found.append(mapped)
    return found


def _split_piece(source: Source, context: Context, loops: dict[int, Any], top: Loop,
                 child: Loop, line: int, done: list[Step], part: Any = None
                 ) -> tuple[NestMapping, list[Step]] | None:
    """One kernel of ``_split_pieces``: the loops named by ``line`` (the first statement of
    the nest they run; ``part``: the one statement of ``child``'s body it runs, where there
    are several)."""
    def at(loop: Loop) -> str:
        return f"{loop.var}@{line}"

    for order in ((top, child), (child, top)):
        steps = [make_step("permute", *(at(loop) for loop in order))] \
            if order[0] is child else []
        steps.append(make_step("parallel", at(order[0])))
        try:
            result = source.transform([*done, *steps], emit=PROOF)
        except _refusals():
            continue
        atomics, problem = _atomics(result.program, order[:1], line)
        if problem or atomics:
            continue
        mapping = _mapping(context, child, order, order[:1], atomics, tuple(steps), loops)
        if part is not None:
            mapping = replace(mapping, node=part, part=part)
        split, split_steps = _with_split(source, context, mapping, [*done, *steps], steps,
                                         loops, at, line)
        if split.split is None:
            continue
        return replace(split, reasons=(_pieces_reason(top), *split.reasons)), split_steps
    return None


def _pieces_reason(top: Loop) -> tuple[str, str]:
    return (f"distribute({label(top)})", f"{top.var}'s body holds nests that would update "
            "arrays atomically: each statement and nest a kernel")


def _syntax_of(loops: dict[int, Any], top: Loop, parent: Loop, line: int) -> Any:
    """The syntax of the statement at ``line`` (the file's) in ``parent``'s body (the
    syntax counts lines from the function's source: ``top`` gives the shift); None where
    it is not one statement of the body itself (one under an ``if``: a kernel of its own
    would lose the condition)."""
    shift = top.line - loops[id(top)].lineno
    found = [node for node in loops[id(parent)].body if node.lineno == line - shift]
    return found[0] if len(found) == 1 and not isinstance(found[0], ast.If) else None


def host_nests(source: Source, context: Context, loops: dict[int, Any], top: Loop,
               done: list[Step]) -> list[tuple[NestMapping, list[tuple[str, str]],
                                                list[Step]]] | None:
    """The nests inside ``top``, each mapped with ``top`` run on the host around their
    kernels (kernels launched one after another keep every order between them: each
    iteration of ``top`` runs them in turn, as written), where ``top``'s bounds are sizes
    alone, its body is loops and plain statements the host runs between them (``total =
    0.0``, ``mean = total / n``, ``err[0] = 0.0``: reading no scalar a kernel assigns but a
    sum it reads back, nor ``top``'s variable: a solve's row by row work, ``x[i] = b[i]``,
    is one block's, not a launch per row), and at least one nest gets a grid (every one,
    where the host runs statements too); else None. A loop inside that no grid holds is a
    host loop in turn where it can be and its bounds are constants (red-black's ``for
    color in range(2)``), else runs in one block where it can (``one_block``)."""
    parameters = set(context.analysis.nest.parameters)
    children = [child for child in top.body if isinstance(child, Loop)]
    syntax = loops[id(top)].body
    if not children or not top.bound_symbols() <= parameters or not all(
            isinstance(node, ast.For) or isinstance(node, (ast.Assign, ast.AugAssign))
            and top.var not in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            for node in syntax):
        return None
    found = []
    steps: list[Step] = []
    host_reason = (f"host loop {label(top)}", f"{top.var} carries dependences: each "
                   "of its iterations launches the kernels of the nests inside it, one "
                   "after another, on arrays that stay on the GPU")
    for child in children:
        mapping, refused, inner = _map_nest(source, context, loops, child, [*done, *steps])
        # a loop of a few steps inside (red-black's colours, bounds of constants alone) is
        # a host loop too; not one of many (doitgen's q: a launch per (r, q), each tiny)
        deeper = None if mapping.grid or child.bound_symbols() else host_nests(
            source, context, loops, child, [*done, *steps])
        if deeper is not None:
            for nested, nested_refused, nested_steps in deeper:
                steps += nested_steps
                found.append((replace(nested, host=(top, *nested.host),
                                      reasons=(host_reason, *nested.reasons)),
                              refused + nested_refused, nested_steps))
            continue
        if not mapping.grid:  # a nest no grid holds: one block, not one thread, where it can
            mapping, inner = one_block(source, context, loops, child, [*done, *steps],
                                       mapping)
        steps += inner
        found.append((replace(mapping, host=(top,),
                              reasons=(host_reason, *mapping.reasons)), refused, inner))
    private = assigned([m.node for m, _, _ in found]) - {name for m, _, _ in found
                                                        for name, _ in m.sums}
    named = {n.id for node in syntax if not isinstance(node, ast.For)
             for n in ast.walk(node) if isinstance(n, ast.Name)}
    if named & private:  # a thread's own value: the host can neither read nor set it
        return None
    # with the host's statements between them, every nest a grid (else one block runs
    # the whole loop, barriers between its parts: no launches per iteration)
    every = len(syntax) > len(children)
    grids = [bool(mapping.grid) for mapping, _, _ in found]
    return found if (all(grids) if every else any(grids)) else None


def _candidates(analysis: Analysis, top: Loop) -> list[tuple[tuple[Loop, ...],
                                                             tuple[Loop, ...]]]:
    band = _band_at(analysis, top)
    orders = [band]
    if _rectangular(band):
        orders += [o.order for o in _options(analysis, band) if o.order != band]
    found = []
    for count in range(min(MAX_GRID, len(band)), 0, -1):
        for order in orders:
            grid = order[:count]
            if (order, grid) not in found and (order == band or grid != band[:count]):
                found.append((order, grid))
    return found


def _rectangular(band: tuple[Loop, ...]) -> bool:
    """Whether no bound of the band's loops names another of its loops."""
    names = {loop.var for loop in band}
    return not any(loop.bound_symbols() & names for loop in band)


def _steps(analysis: Analysis, top: Loop, order: tuple[Loop, ...],
           grid: tuple[Loop, ...], copied: Sequence[str] = (),
           reduced: frozenset[str] = frozenset()) -> list[Step]:
    """The recipe proving ``grid``: privatize the nest's scalars (but those the grid
    ``reduced``), permute to ``order``, copy the arrays ``copied`` before ``top`` (the reads
    that see only values from before it), each grid loop parallel."""
    scalars = sorted({a.variable.name for s in top.statements() for a in s.accesses
                      if a.write and not a.variable.is_array} - reduced)
    steps = [privatize_step(analysis.nest, name, top) for name in scalars]
    band = _band_at(analysis, top)
    if order != band[:len(order)]:
        steps.append(make_step("permute", *(label(loop) for loop in order)))
    steps += [make_step("copy", name, label(top)) for name in copied]
    steps += [make_step("parallel", label(loop)) for loop in grid]
    return steps


def _copied_arrays(context: Context, grid: Sequence[Loop]) -> list[str]:
    """The arrays a grid loop's only remedy for them is a copy before the loop (trmm's
    ``B``: each row reads rows that later iterations overwrite)."""
    return sorted({remedy.variable for loop in grid for remedy in context.report(loop).remedies
                   if remedy.kind == "copy"})


def _with_copies(mapping: NestMapping, copies: tuple[CopiedReads, ...]) -> NestMapping:
    """``mapping`` reading through ``copies``, each named among its reasons."""
    reasons = tuple((f"{c.name} = {c.array}.copy() before the kernel",
                     f"{', '.join(sorted(c.reads)) or 'every read of ' + c.array} read only "
                     "values from before the nest, which its iterations overwrite: read from "
                     "the copy, they no longer order the iterations") for c in copies)
    return replace(mapping, copies=copies, reasons=mapping.reasons + reasons)


def _copies(program: Any, top: Loop) -> tuple[CopiedReads, ...]:
    """The copies the transformer made before ``top``, and the reads each serves."""
    return tuple(CopiedReads(b.variable.name, b.name, b.reads) for b in program.buffers
                 if b.kind == "copy" and label(b.loop.origin) == label(top))


# how the transformer's proofs are emitted: only their programs are read (the kernels are
# written from the mappings), and Python takes every step proved (Numba has no atomic min)
PROOF = "python"
# the reductions of a scalar the whole grid may do (atomically, once per block), and of
# an array element many threads may do (atomically, each update)
GRID_OPS = set(GRID_COMBINE)


def _grid_reduced(context: Context, grid: Sequence[Loop]) -> frozenset[str]:
    """The scalars the outermost grid loop reduces with an operator of ``GRID_OPS``: each
    thread sums its share of the grid's (never privatized: no grid iteration sets them
    anew)."""
    arrays = {v.name for v in context.analysis.nest.variables if v.is_array}
    return frozenset(remedy.variable for remedy in context.report(grid[0]).remedies
                     if remedy.kind == "reduction" and remedy.op in GRID_OPS
                     and remedy.variable not in arrays)


def _atomics(program: Any, grid: tuple[Loop, ...], line: int | None = None
             ) -> tuple[frozenset[str], str | None]:
    """Arrays updated atomically by the grid loops (only their copies around the statement
    at ``line``, where given: a distributed loop), or why the grid cannot run."""
    atomics, _, problem = _reductions(program, grid, line)
    return atomics, problem


def _reductions(program: Any, grid: tuple[Loop, ...], line: int | None = None,
                scalars: frozenset[str] = frozenset()
                ) -> tuple[frozenset[str], tuple[tuple[str, str], ...], str | None]:
    """Arrays updated atomically by the grid loops (only their copies around the statement
    at ``line``, where given: a distributed loop) and the reductions ((name, op)) of the
    ``scalars`` the grid may reduce, or why the grid cannot run."""
    names: set[str] = set()
    sums: dict[str, str] = {}
    labels = {label(loop) for loop in grid}  # the transformer's loops are its own objects
    for node in program.loops():
        if label(node.origin) not in labels or not node.parallel:
            continue
        if line is not None and all(unit.line != line for unit in node.units()):
            continue
        for reduction in node.reductions:
            if reduction.scalar and reduction.name in scalars \
                    and sums.get(reduction.name, reduction.op) == reduction.op:
                sums[reduction.name] = reduction.op
            elif reduction.scalar:
                return frozenset(), (), (f"{node.origin.var} needs a reduction of the scalar "
                                         f"{reduction.name} across threads")
            elif reduction.op not in GRID_OPS:
                return frozenset(), (), (f"{reduction.name} is updated with {reduction.op} "
                                         "from many threads (atomics here do +, -, min and "
                                         "max)")
            else:
                names.add(reduction.name)
    return frozenset(names), tuple(sorted(sums.items())), None


def _grid_text(grid: Sequence[Loop]) -> str:
    return "threads over " + ", ".join(label(loop) for loop in grid)


def _x_loop(context: Context, top: Loop, grid: tuple[Loop, ...]
            ) -> tuple[Loop, str, bool, bool]:
    """The grid loop for threadIdx.x: the one most accesses are unit-stride along (a write
    counts twice: a write that does not coalesce costs a read and a write of each sector),
    the innermost on a tie; whether another access is unit-stride along another grid
    loop and strided along that one (a transposition's: ``NestMapping.crossing``); and
    whether, for every loop inside the grid, the accesses that move along it count at
    least as much along x as along it (``NestMapping.coalesced``: else a rewrite may bring
    such a loop into the grid)."""
    accesses = array_accesses(context.model, top.statements())

    def units(loop: Loop, among: list[Any] = accesses) -> list[Any]:
        return [a for a in among if stride(a.subscripts, loop.var) == "unit"]

    def score(loop: Loop, among: list[Any] = accesses) -> int:
        return sum(2 if a.access.write else 1 for a in units(loop, among))

    best, best_score, best_texts = grid[-1], -1, []
    for loop in reversed(grid):
        found = score(loop)
        if found > best_score:
            best, best_score, best_texts = loop, found, sorted({a.text for a in units(loop)})
    # a loop inside whose accesses coalesce along it more than along x (an expanded
    # scalar, ``acc[b, i]``, the same all along the loop, does not count for x)
    inside = [loop for loop in context.analysis.nest.loops
              if top in loop.enclosing and loop not in grid]
    coalesced = all(score(best, [a for a in accesses if stride(a.subscripts, loop.var)
                                 != "invariant"]) >= score(loop) for loop in inside)
    why = (f"{', '.join(best_texts)} unit-stride along {best.var}: a warp's accesses fall in "
           "consecutive addresses (coalesced)" if best_texts else
           f"no access is unit-stride along a grid loop: {best.var}, the innermost")
    crossing = any(stride(a.subscripts, loop.var) == "unit"
                   and stride(a.subscripts, best.var) == "strided"
                   for a in accesses for loop in grid if loop is not best)
    return best, why, crossing, coalesced


def _mapping(context: Context, top: Loop, order: tuple[Loop, ...], grid: tuple[Loop, ...],
             atomics: frozenset[str], steps: tuple[Step, ...],
             loops: dict[int, Any], sums: tuple[tuple[str, str], ...] = ()) -> NestMapping:
    x, why_x, crossing, coalesced = _x_loop(context, top, grid)
    reasons = [(_grid_text(grid), "no dependence crosses two of their iterations once "
                "each thread keeps its own scalars (the transformer proved "
                f"{'; '.join(map(str, steps))})")]
    band = _band_at(context.analysis, top)
    if order != band[:len(order)]:
        reasons.append((str(make_step("permute", *(label(loop) for loop in order))),
                        "the grid loops first, in a legal order"))
    reasons.append((f"threadIdx.x on {label(x)}", why_x))
    if atomics:
        reasons.append((f"atomic updates of {', '.join(sorted(atomics))}",
                        "a generalized reduction: many threads update the same elements"))
    for name, op in sums:
        reasons.append((f"reduction {op} on {name} across the grid",
                        "each thread reduces its iterations' share in a register, a block "
                        "its threads' by shuffles and shared memory, and each block's result "
                        f"goes atomically into one copy of {name} on the GPU, read back "
                        "after the kernel"))
    return NestMapping(top, loops[id(top)], order, grid, x, atomics, steps, tuple(reasons),
                       sums=sums, crossing=crossing, coalesced=coalesced)


SPLIT_OPS = {"+", "-", "*", "min", "max", "&", "|", "^"}


def _with_split(source: Source, context: Context, mapping: NestMapping, done: list[Step],
                steps: list[Step], loops: dict[int, Any], name: Any = label,
                line: int | None = None) -> tuple[NestMapping, list[Step]]:
    """A one-loop grid whose one inner loop is a reduction (of scalars, or of array elements
    it updates at one place, kept in registers across it: ``facts.promotable``): that loop
    split across threads, each summing its part, the parts combined after it. Where more
    of its reads are unit-stride along it than along the grid loop, a warp's lanes split it
    (coalesced: a warp per row of a matrix-vector product); else the grid loop stays on
    threadIdx.x and the block's rows split it (a column sum: the grid alone may give too
    few threads to keep the GPU busy; how many rows is the config's). Else as it was."""
    if len(mapping.grid) != 1 or mapping.atomics or len(mapping.order) > 2:
        return mapping, steps
    (grid,) = mapping.grid
    if len(mapping.order) == 2:  # a band of two, maybe interchanged: the thread runs the other
        split = mapping.order[1]
        innermost = max(mapping.order, key=lambda loop: loop.depth)
        body = [mapping.part] if mapping.part is not None else loops[id(innermost)].body
        thread_loop = ast.copy_location(ast.For(
            target=loops[id(split)].target, iter=loops[id(split)].iter, body=body,
            orelse=[]), loops[id(split)])
        statements = [s for s in innermost.statements()
                      if mapping.part is None or s.line == line]
        outside = []
    else:
        inner = [node for node in grid.body if isinstance(node, Loop)]
        if len(inner) != 1:
            return mapping, steps
        (split,) = inner
        thread_loop, statements = loops[id(split)], split.statements()
        outside = [node for node in loops[id(grid)].body if node is not thread_loop]
    if split.step != 1:
        return mapping, steps
    in_registers = promotable(thread_loop)
    if any(a.write and a.variable.is_array and a.variable.name not in in_registers
           for st in statements for a in st.accesses):
        return mapping, steps
    if any(written_arrays([node]) and assigned([node]) for node in outside):
        return mapping, steps  # one thread writes the array, every thread needs the scalar
    accesses = [a for a in array_accesses(context.model, statements)
                if not a.access.write and a.access.variable.name not in in_registers]
    along_split = sum(stride(a.subscripts, split.var) == "unit" for a in accesses)
    along_grid = sum(stride(a.subscripts, grid.var) == "unit" for a in accesses)
    step = make_step("parallel", name(split))
    try:
        result = source.transform([*done, step], emit=PROOF)
    except _refusals():
        return mapping, steps
    node = next(n for n in result.program.loops() if label(n.origin) == label(split) and (
        line is None or any(unit.line == line for unit in n.units())))
    if not node.parallel or not node.reductions or any(
            not (r.scalar or r.name in in_registers) or r.op not in SPLIT_OPS
            for r in node.reductions):
        return mapping, steps
    reductions = tuple((r.name, r.op) for r in node.reductions)
    names = ", ".join(f"{reduced} ({op})" for reduced, op in reductions)
    steps_text = "; ".join(map(str, (*mapping.steps, step)))
    rows = along_split <= along_grid
    reasons = tuple((r[0], r[1].replace("; ".join(map(str, mapping.steps)), steps_text))
                    for r in mapping.reasons if rows or not r[0].startswith("threadIdx.x"))
    if rows:
        reasons += ((f"the block's rows splitting {name(split)}",
                     f"each row sums its part of {names} (combined in shared memory): "
                     f"{grid.var} alone may give too few threads to fill the GPU"),)
    else:
        reasons += ((f"a warp per iteration of {name(grid)}, its lanes splitting "
                     f"{name(split)}",
                     f"{along_split} of the reads in {split.var} are unit-stride along it "
                     f"and {along_grid} along {grid.var}: lanes on consecutive {split.var} "
                     f"coalesce; each lane sums its part of {names}, shuffles combine "
                     "the parts"),)
    return replace(mapping, x=grid if rows else None, split=split, reductions=reductions,
                   split_rows=rows, steps=(*mapping.steps, step), reasons=reasons), \
        [*steps, step]


def one_block(source: Source, context: Context, loops: dict[int, Any], top: Loop,
              done: list[Step], sequential: NestMapping) -> tuple[NestMapping, list[Step]]:
    """A nest no grid holds, run by one block instead of one thread: its innermost loops
    that the transformer proves parallel, but for reductions of scalars or of elements
    kept in registers (``facts.promotable``), shared by the block's threads, each
    reduction combined after its loop (a triangular solve's row sum ``x[i] -= L[i, j] *
    x[j]``: the rows stay in order, each row's sum by 1,024 threads). Else
    ``sequential`` as it was. A part that thread 0 alone runs (it writes an array) and that
    assigns a scalar rules it out (every thread needs the scalar: a recurrence ``t =
    B[j - 1]`` in a loop that writes ``B``, read by a shared loop after it)."""
    splits, steps = _shared_loops(source, context, loops, top, done)
    if not splits:
        return sequential, []
    names = ", ".join(label(loop) for loop, _ in splits)
    reasons = ((f"one block, its threads sharing {names}",
                f"the transformer proved {'; '.join(map(str, steps))}; the loops around "
                "them stay in order (every thread runs them), what they write thread 0 "
                "writes, barriers between"),
               *sequential.reasons)
    return replace(sequential, steps=tuple(steps), reasons=reasons,
                   block_splits=tuple(splits)), steps


def _shared_loops(source: Source, context: Context, loops: dict[int, Any], top: Loop,
                  done: list[Step]) -> tuple[list[tuple[Loop, tuple[tuple[str, str], ...]]],
                                             list[Step]]:
    """The innermost loops inside ``top`` that the transformer proves parallel after
    ``done`` but for reductions of scalars or of elements kept in registers
    (``facts.promotable``), with those reductions, and the steps that prove them: the
    loops a block's threads may share; none where a part thread 0 alone would run assigns
    a scalar (``_lead_assigns``)."""
    nest = [loop for loop in context.analysis.nest.loops
            if loop is top or top in loop.enclosing]
    innermost = [loop for loop in nest if loop is not top and loop.step == 1
                 and not any(isinstance(child, Loop) for child in loop.body)]
    splits: list[tuple[Loop, tuple[tuple[str, str], ...]]] = []
    steps: list[Step] = []
    for loop in innermost:
        in_registers = promotable(loops[id(loop)], apart=True)
        step = make_step("parallel", label(loop))
        try:
            result = source.transform([*done, *steps, step], emit=PROOF)
        except _refusals():
            continue
        proved = next(n for n in result.program.loops() if label(n.origin) == label(loop))
        if not proved.parallel or any(not (r.scalar or r.name in in_registers)
                                      or r.op not in SPLIT_OPS for r in proved.reductions):
            continue
        splits.append((loop, tuple((r.name, r.op) for r in proved.reductions)))
        steps.append(step)
    shared = {id(loops[id(loop)]) for loop, _ in splits}
    if _lead_assigns([loops[id(top)]], lambda node: id(node) in shared):
        return [], []
    return splits, steps


def _rows_by_blocks(source: Source, context: Context, loops: dict[int, Any],
                    mapping: NestMapping, done: list[Step], steps: list[Step]
                    ) -> tuple[NestMapping, list[Step]]:
    """A one-loop grid of few iterations (under ``FEW_ITERATIONS``) whose body holds long
    loops (``FEW_ITERATIONS`` or more) that no single split serves (softmax's rows: a
    maximum, then a sum, then a scaling, each along the row): a block per grid iteration,
    its threads sharing each of those loops that the transformer proves parallel but for
    reductions, barriers between, what the rest writes thread 0 writes. Else ``mapping``
    as it was (16 rows of a million columns were 16 threads)."""
    from loclab.optimize.cuda.mapping import FEW_ITERATIONS

    if len(mapping.grid) != 1 or mapping.split is not None or mapping.atomics \
            or mapping.sums or len(mapping.order) != 1:
        return mapping, steps
    (grid,) = mapping.grid
    inside = [loop for loop in context.analysis.nest.loops if grid in loop.enclosing]
    if context.extents.get(grid.var, FEW_ITERATIONS) >= FEW_ITERATIONS or not any(
            context.extents.get(loop.var, 0) >= FEW_ITERATIONS for loop in inside):
        return mapping, steps
    splits, shared_steps = _shared_loops(source, context, loops, grid, done)
    if not splits:
        return mapping, steps
    names = ", ".join(label(loop) for loop, _ in splits)
    reasons = (*(r for r in mapping.reasons if not r[0].startswith("threadIdx.x")),
               (f"a block per iteration of {label(grid)}, its threads sharing {names}",
                f"{grid.var} has few iterations and the loops inside are long; the "
                f"transformer proved {'; '.join(map(str, shared_steps))}; what the rest "
                "writes thread 0 writes, barriers between"))
    return replace(mapping, x=None, steps=(*mapping.steps, *shared_steps), reasons=reasons,
                   block_splits=tuple(splits)), [*steps, *shared_steps]


def _lead_assigns(body: list[ast.stmt], is_split: Any) -> bool:
    """Whether a part of ``body`` that thread 0 alone runs (``facts.block_role``) assigns a
    scalar: the block's other threads would go on with their own, stale."""
    for node in body:
        role = block_role(node, is_split)
        if role == "around" and _lead_assigns([*node.body, *node.orelse], is_split):
            return True
        if role == "lead" and assigned([node]):
            return True
    return False


def _sequential(context: Context, top: Loop, loops: dict[int, Any]) -> NestMapping:
    reasons = tuple(("one thread", sequential_reason(context.report(loop)))
                    for loop in context.analysis.nest.loops
                    if loop is top or top in loop.enclosing)
    return NestMapping(top, loops[id(top)], (top,), (), None, frozenset(), (), reasons)
