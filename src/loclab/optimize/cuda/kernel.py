"""One top-level nest as a CUDA kernel: the grid loops become threads, the rest of the nest is
each thread's code, written from the user's own statements.

A thread of block ``b`` runs iterations ``b * B * R + r * B + t`` (``r < R``) of each grid
loop: ``B`` threads along it, ``R`` iterations each, neighbouring threads on neighbouring
iterations (so the loop on ``threadIdx.x`` walks unit-stride accesses in step); a product's
kernel may lay them out otherwise (``cuda.mma``'s fragments for doubles, ``cuda.warp_layout``'s
groups of 4 for 4-byte floats: a bijection all the same). With ``R > 1``
the thread's iterations are jammed: every loop inside whose bounds do not depend on them runs
once, its body repeated per iteration (unroll-and-jam: legal because no dependence crosses
two grid iterations), so what one iteration loads from a shared tile or keeps in a register
serves all. A loop inside with uniform bounds (the same in every thread of a block) may have
read-only arrays *staged*: a strip of its iterations at a time, every thread of the block
copies a part of the tile they read into shared memory, coalesced (last dimension along
threads), then reads its own elements from there; staged are tiles that threads share
(reuse) or whose direct reads would not coalesce. An array element the loop reads and
writes at one place (``C[i, j] += ...``) is kept in a register across the loop (scalar
replacement) and stored once after it.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from loclab.nest.ir import Loop
from loclab.nest.python import update_extremum, update_increment
from loclab.optimize.cuda import chunks, pipeline, sums
from loclab.optimize.cuda.facts import (Offset, arrays_in, assigned, block_role,
                                        index_locals, loop_vars, names_in, offset_of,
                                        promotable, range_args, read_forms, reads,
                                        subscripts, uniform_loops, walk, write_stages,
                                        written_arrays)
from loclab.optimize.cuda.mapping import AXES, WARP, Config, NestMapping
from loclab.optimize.cuda.mma import (LANE_NAMES, MMA_K, MmaLayout, Product, layout_for,
                                      product, shared_pad)
from loclab.optimize.cuda.warp_layout import COMPONENTS, VECTOR, WarpLayout, vector_pad
from loclab.optimize.cuda.warp_layout import LANE_NAMES as WARP_LANES
from loclab.optimize.cuda.warp_layout import warp_layout_for
from loclab.transform.cuda_syntax import (COMBINE, Translator, Typing, c_type, join,
                                          subscript_parts)

# A split loop's reductions: what lanes other than the first start from, and how the lanes'
# results combine (a difference accumulates negated terms: its parts add up).
LANE_IDENTITY = {"+": "0", "-": "0", "*": "1", "^": "0"}
LANE_COMBINE = {"+": "add", "-": "add", "*": "mul", "min": "min", "max": "max", "&": "and",
                "|": "or", "^": "xor"}
SHARED_LIMIT = 48 * 1024  # bytes of static shared memory a block may declare
# bytes a warp tiles' ring may take as dynamic shared memory, past the static limit (the
# opt-in most GPUs from sm_70 allow; an H200 allows 227 KiB): strips of 16 of a 128 x 256
# block tile in a ring of 3 take 75 KiB
DYNAMIC_LIMIT = 96 * 1024
PREFETCH_LIMIT = 16  # elements of a tile a thread holds in registers for the next strip
PAD = 1  # elements added to a staged tile's rows: columns then span all 32 banks
VECTOR_TYPES = {"float": "float4", "int": "int4"}  # 16-byte groups of 4-byte elements
# A row split's parts combined across the block's rows (threadIdx.y): each thread leaves its
# part in shared memory, every thread combines its column's parts in row order. The first
# barrier keeps the parts of a previous call safe until every thread has read them. Called
# by every thread of the block alike.
ROW_PART = "part[r * blockDim.x + threadIdx.x]"  # row r's part in this thread's column
ROW_HELPERS = "".join(
    f"""template <typename T> __device__ __forceinline__ T loclab_rows_{name}(T v) {{
  __shared__ T part[1024];
  __syncthreads();
  part[threadIdx.y * blockDim.x + threadIdx.x] = v;
  __syncthreads();
  v = part[threadIdx.x];
  for (int r = 1; r < (int)blockDim.y; ++r) v = {combine.format("v", ROW_PART)};
  return v; }}
""" for name, combine in COMBINE.items())


@dataclass(frozen=True)
class GridAxis:
    """How the launcher sizes one grid loop: its first value and iteration count (Python
    text of the sizes, the box around every value it takes), threads and copies per
    thread, the block axis it runs on."""

    var: str
    first: str
    count: str
    block: int
    tile: int
    axis: int
    # the step threads take between values: the loop's, or 1 where its start moves with the
    # grid loops outside it (``range(1 + (i + c) % 2, N, 2)``: both parities; each thread's
    # guard keeps the values its own start reaches)
    step: int


@dataclass(frozen=True)
class Kernel:
    """A kernel's text and what its launcher passes: ``arrays`` (each with its extents),
    ``sizes`` (as the function names them) and ``scalars`` by value, a one-element device
    array per scalar the grid reduces (``sums``: name, operator, NumPy type; the launcher
    makes it from the scalar's value and reads the scalar back from it), then each grid
    axis's first value and count."""

    name: str
    text: str
    arrays: tuple[str, ...]
    sizes: tuple[str, ...]
    scalars: tuple[str, ...]
    axes: tuple[GridAxis, ...]
    threads: int
    staged: tuple[str, ...] = ()  # what was staged, for the explanation
    promoted: tuple[str, ...] = ()  # array elements kept in registers across a loop
    lanes: int = 1  # threads along x per grid iteration
    rows: int = 1  # threads along y per grid iteration (a row split)
    tensor_cores: bool = False  # a product's strips run as mma.sync (``cuda.mma``)
    sums: tuple[tuple[str, str, str], ...] = ()
    # blocks sharing a grid iteration's split loop (``cuda.chunks``), and the NumPy type of
    # each of its reductions' parts
    chunks: int = 1
    parts: tuple[str, ...] = ()
    pipelined: bool = False  # staged strips copied by cp.async (``cuda.pipeline``)
    dynamic_shared: int = 0  # bytes of the ring in dynamic shared memory (``DYNAMIC_LIMIT``)


@dataclass
class _Stage:
    """An array staged along one loop: its tile's dimensions, and the shared array's name.
    A read-only array's tile is loaded before each strip; a written one's (``writes``) is
    filled by the strip's stores and copied out after it (``write_stages``)."""

    array: str
    dims: tuple[tuple[str | None, int, int], ...]  # (var, smallest offset, largest offset)
    name: str
    along: str  # the loop it is staged along ("": once per block, for the whole body)
    # that loop's place (line, column): a sibling loop of the same variable (adi's backward
    # sweep beside its forward one) neither loads the tile nor reads it
    at: tuple[int, int] = (0, 0)
    writes: bool = False
    # a written tile kept in the cells of this read tile (``in_place``): none of its own
    within: str = ""

    def extent(self, spans: dict[str, int], d: int) -> int:
        var, low, high = self.dims[d]
        return (spans[var] if var is not None else 1) + high - low

    @property
    def form(self) -> tuple[str | None, ...]:
        """The loop each dimension's subscript moves with: the reads this tile serves."""
        return tuple(dim[0] for dim in self.dims)

    @property
    def key(self) -> str:
        """The tile's name without the ``s_`` of shared memory (its prefetch registers'
        stem)."""
        return self.name[2:]


@dataclass
class _Copy:
    """One combination of a thread's grid iterations: its names and its validity flag."""

    index: tuple[int, ...]
    rename: dict[str, str]
    ok: str
    registers: dict[str, str] = field(default_factory=dict)  # promoted arrays' registers


@dataclass
class KernelWriter:
    """Writes one kernel. ``typing`` knows the arrays and sizes; ``where`` names a node's
    file:line; ``sizes`` are the function's size parameters (C names by Python text)."""

    name: str
    mapping: NestMapping
    config: Config
    typing: Typing
    sizes: dict[str, str]
    scalar_args: set[str]
    loops: dict[int, ast.For]  # the syntax of every original loop, by id(Loop)
    where: Callable[[ast.AST], str]
    # scalars the kernel assigns whose value on entry is the host's (durbin's ``beta = 1.0``
    # before its loop): each local starts from it, passed as ``{name}_in``
    live_in: frozenset[str] = frozenset()
    lines: list[str] = field(default_factory=list)
    staged: dict[str, _Stage] = field(default_factory=dict)
    promoted: list[str] = field(default_factory=list)
    # the staged loops open where code is written: their variables ("": the whole body), and
    # each one's place (a tile serves reads in the loop it was loaded in, not in a sibling
    # loop of the same variable that stages other arrays)
    inside: set[str] = field(default_factory=set)
    open_at: dict[str, tuple[int, int]] = field(default_factory=dict)
    # the written tiles the stores of the code being written go to: those of a staged loop
    # reached by every iteration of a block whose iterations all exist (``write_stages``)
    storing: set[str] = field(default_factory=set)
    whole_block: bool = False  # writing the branch of blocks whose every iteration is valid
    copy_count: int = 1  # the thread's grid iterations (the copies of its code)
    chunks: int = 1  # blocks sharing a grid iteration's split loop (``cuda.chunks``)
    strip: int = 0  # the strip tiles are staged in (the config's, or smaller to fit)
    # tiles in the ring of each staged loop's read tiles (``cuda.pipeline``; 0: their strips
    # go through registers), and the ring's slot of each tile being computed from
    ring: int = 0
    slots: dict[str, str] = field(default_factory=dict)
    # a tile loaded where it is needed (not a strip ahead) is copied by cp.async where the
    # config pipelines: every copy in flight at once (``_copy_tile``); the copies not yet
    # waited for, and whether any kernel code copies so (the module's helpers)
    sent: bool = False
    copied_async: bool = False
    hoisting: dict[str, tuple[str, str]] | None = None  # staged reads held in registers
    redirected: dict[int, str] = field(default_factory=dict)  # reads of copies, by node id
    # the subscript (its indices as written) of each array element kept in a register
    in_register: dict[str, list[str]] = field(default_factory=dict)
    registers: set[str] = field(default_factory=set)  # the names of those registers
    index_type: str = "I"  # the kernel's template parameter (``module.LauncherNames``)
    # the fragments' layout where products run on the tensor cores (``cuda.mma``), and the
    # loops that are such products, by their place (line, column)
    mma: MmaLayout | None = None
    products: dict[tuple[int, int], tuple[ast.For, Product]] = field(default_factory=dict)
    used_mma: bool = False
    # the warp tiles' layout where products of 4-byte floats have one (``cuda.warp_layout``),
    # and each grid iteration's name in the thread's copies: (the loop, its place r)
    warps: WarpLayout | None = None
    grid_names: dict[str, tuple[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.strip = self.config.strip

    # -- the thread's code ------------------------------------------------------------------
    def body(self) -> list[ast.stmt]:
        """The code one thread runs for one combination of grid iterations: the band's loops
        after the grid ones (in the mapping's order), then the innermost body."""
        mapping = self.mapping
        if not mapping.grid:
            return [mapping.node]
        innermost = max(mapping.order, key=lambda loop: loop.depth)  # as written: the band
        # may be reordered (grid j over i: the thread runs i in the body of j); a kernel of
        # a distributed loop may run one statement of the innermost body alone
        inner = [mapping.part] if mapping.part is not None else self.loops[id(innermost)].body
        for loop in reversed(mapping.order[len(mapping.grid):]):
            node = self.loops[id(loop)]
            inner = [ast.copy_location(ast.For(target=node.target, iter=node.iter, body=inner,
                                               orelse=[]), node)]
        return inner

    def write(self) -> Kernel:
        body = self.body()
        ix = self.index_type
        grid_vars = [g.var for g in self.mapping.grid]
        locals_ = assigned(body)
        inner_loops = loop_vars(body)
        self.typing.integers |= set(grid_vars) | inner_loops | set(self.sizes)
        for name, value_type in _local_types(body, self.typing, locals_).items():
            self.typing.scalars[name] = value_type
        copies = self._copies(grid_vars, locals_)
        self.copy_count = len(copies)
        self.chunks = self.config.chunks if self._shareable(body) else 1
        self.redirected = _redirected(body, self.mapping)
        arrays = sorted(arrays_in(body) | _shape_arrays(body, self.mapping)
                        | set(self.redirected.values()))
        used = names_in(body) | {n for g in self.mapping.grid
                               for n in names_in([self.loops[id(g)]])}
        sizes = sorted(p for p in self.sizes if p in used)
        scalars = sorted(n for n in self.scalar_args if n in used and n not in locals_)
        # a sum across the grid starts each thread's copies from 0, a min or max from the
        # host's value (``sums``)
        summed = sums.from_identity(self.mapping.sums)
        entering = sorted(n for n in self.live_in if n in locals_ and n in used
                          and n not in summed)
        indexes = index_locals(body, self.typing.integers, locals_ - set(entering) - {
            name for name, _ in (*self.mapping.sums, *self.mapping.reductions)})
        read_only = {a for a in arrays if a not in written_arrays(body)}
        axes = self._axes()
        self.lines = []
        out = self.lines
        params = []
        for array in arrays:
            kind = c_type(self.typing.arrays[array])
            const = "const " if array in read_only else ""
            params.append(f"{const}{kind}* __restrict__ {array}")
            params += [f"const {ix} {array}_n{d}" for d in range(self.typing.ndims[array])]
        params += [f"const {ix} {self.sizes[p]}" for p in sizes]
        params += [f"const {c_type(self.typing.scalars[s])} {s}" for s in scalars]
        params += [f"const {c_type(self.typing.scalars[s])} {s}_in" for s in entering]
        params += sums.parameters(self.mapping.sums, self.typing)
        if self.chunks > 1:
            params += chunks.parameters([c_type(k) for k in self._part_types()])
        for axis in axes:
            params += [f"const {ix} first_{axis.var}", f"const {ix} count_{axis.var}"]
        threads = self.config.threads if self.mapping.threads_share else 1
        out.append(f"template <typename {ix}>")
        out.append(f"__global__ void __launch_bounds__({threads}) {self.name}(")
        out.append("    " + ",\n    ".join(params) + ") {")
        self._choose_products(body, locals_)
        self._stages(body, read_only, locals_)
        if self._keep_staged_products():  # the tiles' pads and orders were the layout's
            self._stages(body, read_only, locals_)
        self.ring = self._ring_depth()
        dynamic = self._dynamic_bytes()
        placed = 0
        if dynamic:
            out.append("  extern __shared__ __align__(16) unsigned char loclab_dynamic[];")
        for stage in self.staged.values():
            if stage.within:
                continue
            dims = "".join(f"[{e}]" for e in self._tile_shape(stage))
            kind = c_type(self.typing.arrays[stage.array])
            if dynamic and self._ringed(stage):  # the ring as an array in the dynamic part
                out.append(f"  {kind} (*{stage.name}){dims} = reinterpret_cast<{kind} (*)"
                           f"{dims}>(loclab_dynamic + {placed});")
                placed += self.ring * self._shared_bytes([stage])
                continue
            if self._ringed(stage):
                dims = f"[{self.ring}]{dims}"
            align = "__align__(16) " if self.warps is not None else ""
            out.append(f"  __shared__ {align}{kind} {stage.name}{dims};")
        if self.staged:  # the thread's place in its block, for the copies into the tiles
            out.append("  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + "
                       "blockDim.y * threadIdx.z);")
        for array in sorted({s.array for s in self.staged.values()
                             if self._ringed(s) and self._grouped(s)}):
            last = self.typing.ndims[array] - 1  # every row then starts 16-byte aligned
            out.append(f"  const bool {array}_aligned = loclab_aligned16({array}) && "
                       f"{array}_n{last} % {VECTOR} == 0;")
        depth = 1
        out += sums.shares(self.mapping.sums, self.typing)
        for axis in sorted(axes, key=lambda a: -a.axis):
            a = AXES[axis.axis]
            span = axis.block * axis.tile
            out.append(f"{'  ' * depth}for ({ix} b{a} = blockIdx.{a}; b{a} * {span} < "
                       f"count_{axis.var}; b{a} += gridDim.{a}) {{")
            depth += 1
        self._grid_values(axes, copies, depth)
        for name in sorted(inner_loops - set(grid_vars)):
            out.append(f"{'  ' * depth}{ix} {name};")
        for copy_ in copies:
            for name in sorted(locals_):
                kind = self.typing.scalars.get(name, self.typing.compute)
                start = f" = {name}_in" if name in entering else \
                    f" = ({c_type(kind)})0" if name in summed else ""
                declared = ix if name in indexes else c_type(kind)
                out.append(f"{'  ' * depth}{declared} {copy_.rename.get(name, name)}"
                           f"{start};")
        whole = [stage for stage in self.staged.values() if not stage.along]
        if whole:  # tiles of the whole body: loaded once per block, before it
            out.append(f"{'  ' * depth}__syncthreads();")
            for stage in whole:
                self._copy_tile(stage, depth)
            self._copies_landed(depth)
            out.append(f"{'  ' * depth}__syncthreads();")
            self.inside.add("")
        barriers = bool(self.staged) or self._sharing()[1] == "rows"
        guard_each = len(copies) > 1 or barriers
        if guard_each:  # blocks whose every iteration is valid run without the guards
            every = " && ".join(c.ok for c in copies)
            # with barriers inside, the fast path must be the same for the whole block
            test = f"__syncthreads_and({every})" if barriers else every
            out.append(f"{'  ' * depth}if ({test}) {{")
            self.whole_block = barriers
            self._grid_body(body, copies, depth + 1, guarded=False)
            self.whole_block = False
            if barriers:  # a block none of whose iterations exist (a tile past a triangle's
                # diagonal) skips the body: every write in it is guarded, and the test is
                # the same for the whole block, so no thread waits at a barrier alone
                any_ok = " || ".join(c.ok for c in copies)
                out.append(f"{'  ' * depth}}} else if (__syncthreads_or({any_ok})) {{")
            else:
                out.append(f"{'  ' * depth}}} else {{")
            self.registers.clear()  # the other branch: a scope of its own
            self._grid_body(body, copies, depth + 1, guarded=True)
            out.append(f"{'  ' * depth}}}")
        else:
            out.append(f"{'  ' * depth}if ({copies[0].ok}) {{")
            self._grid_body(body, copies, depth + 1, guarded=False)
            out.append(f"{'  ' * depth}}}")
        out += sums.gathered(self.mapping.sums, [c.rename for c in copies], "  " * depth)
        for level in range(depth - 1, 0, -1):
            out.append(f"{'  ' * level}}}")
        out += sums.combined(self.mapping.sums, self.typing, threads)
        out.append("}")
        return Kernel(self.name, "\n".join(out), tuple(arrays), tuple(sizes),
                      (*scalars, *entering), tuple(axes),
                      threads, tuple(self._stage_text(s) for s in self.staged.values()),
                      tuple(self.promoted),
                      self.config.lanes if self.mapping.threads_share else 1,
                      self.config.rows if self.mapping.grid else 1, self.used_mma,
                      tuple((name, op, sums.sum_type(self.typing, name).name)
                            for name, op in self.mapping.sums),
                      self.chunks,
                      tuple(k.name for k in self._part_types()) if self.chunks > 1 else (),
                      pipelined=self.ring > 0 or self.copied_async,
                      dynamic_shared=dynamic)

    def _shareable(self, body: Sequence[ast.stmt]) -> bool:
        """Whether several blocks may share the grid iteration's split loop
        (``cuda.chunks``): a block per iteration, the loop directly in its body and once,
        no array written before it (every block runs what precedes it) nor in it but the
        elements it reduces in registers (what follows, in the last block alone, reads
        nothing another block wrote but the parts), no grid sum."""
        mapping = self.mapping
        if self.config.chunks <= 1 or mapping.split is None or mapping.split_rows \
                or self.config.lanes <= WARP or mapping.sums or mapping.block_splits \
                or self.copy_count != 1:
            return False
        places = [k for k, node in enumerate(body) if self._is_split(node)]
        if len(places) != 1:
            return False
        split = body[places[0]]
        reduced = {name for name, _ in mapping.reductions}
        return not written_arrays(body[:places[0]]) \
            and written_arrays([split]) <= reduced and not any(
                self._is_split(node) for top in body[places[0] + 1:] for node in ast.walk(top))

    def _part_types(self) -> list[np.dtype]:
        """The types of the split loop's reductions, as the kernel holds them."""
        return [self._held_type(name) for name, _ in self.mapping.reductions]

    def _held_type(self, name: str) -> np.dtype:
        """The type a reduction (a scalar, or an array element in a register) is held in."""
        return np.dtype(self.typing.arrays[name] if name in self.typing.arrays
                        else self.typing.scalars.get(name, self.typing.compute))

    def _sharing(self) -> tuple[int, str, str]:
        """How many threads share the split loop, the scope of their combine (``lanes`` of a
        warp, ``group``: fewer lanes of a warp, ``block``: a block's lanes, ``rows``: a
        block's rows) and the one of them that writes what the grid iteration writes outside
        the loop; (1, "", ""): none."""
        if self.mapping.block_splits:
            return self.config.lanes, "block", "threadIdx.x == 0"
        if self.mapping.split is None:
            return 1, "", ""
        if self.mapping.split_rows:
            return (self.config.rows, "rows", "threadIdx.y == 0") if self.config.rows > 1 \
                else (1, "", "")
        if self.config.lanes <= 1:
            return 1, "", ""
        lanes = self.config.lanes
        return lanes, "lanes" if lanes == WARP else "group" if lanes < WARP else "block", \
            "threadIdx.x == 0"

    def _is_split(self, node: ast.stmt) -> bool:
        """Whether ``node`` is a split loop (or the copy of it ``body`` nests)."""
        return self._split_reductions(node) is not None

    def _split_reductions(self, node: ast.stmt) -> tuple[tuple[str, str], ...] | None:
        """The reductions of ``node``'s threads where it is a split loop, else None."""
        if not isinstance(node, ast.For):
            return None
        splits = [(loop, reductions) for loop, reductions in self.mapping.block_splits]
        if self.mapping.split is not None:
            splits.append((self.mapping.split, self.mapping.reductions))
        for loop, reductions in splits:
            original = self.loops[id(loop)]
            if (node.lineno, node.col_offset) == (original.lineno, original.col_offset):
                return reductions
        return None

    def _block_body(self, body: Sequence[ast.stmt], copies: list[_Copy], depth: int,
                    guarded: bool) -> None:
        """A nest one block runs (``NestMapping.block_splits``), each statement as its
        ``block_role`` says: a split loop in a scope of its own (a sibling split keeps its
        own registers) with a barrier after it; a loop or ``if`` around split loops by every
        thread (its bounds and condition read what was written before a barrier: the same
        in all), its body in turn; what else writes an array by thread 0, a barrier after
        it (the others may read what it wrote); the rest by every thread."""
        pad = "  " * depth
        for node in body:
            role = block_role(node, self._is_split)
            if role == "split":
                self.lines.append(f"{pad}{{")
                self.statement(node, copies, depth + 1, guarded)
                self.lines.append(f"{pad}}}")
                self.lines.append(f"{pad}__syncthreads();")
            elif role == "around" and isinstance(node, ast.For):
                self.lines.append(f"{pad}{_for_header(*self._bounds(node, copies))}")
                self._block_body(node.body, copies, depth + 1, guarded)
                self.lines.append(f"{pad}}}")
            elif role == "around" and isinstance(node, ast.If):
                self.lines.append(f"{pad}if ({self.translator(copies[0]).expr(node.test)}) {{")
                self._block_body(node.body, copies, depth + 1, guarded)
                if node.orelse:
                    self.lines.append(f"{pad}}} else {{")
                    self._block_body(node.orelse, copies, depth + 1, guarded)
                self.lines.append(f"{pad}}}")
            elif role == "lead":
                self.lines.append(f"{pad}if (threadIdx.x == 0) {{")
                self.statement(node, copies, depth + 1, guarded)
                self.lines.append(f"{pad}}}")
                self.lines.append(f"{pad}__syncthreads();")
            else:
                self.statement(node, copies, depth, guarded)

    def _grid_body(self, body: Sequence[ast.stmt], copies: list[_Copy], depth: int,
                   guarded: bool) -> None:
        """One grid iteration's code. Where threads share it (a split loop), a statement
        outside the split loop that writes an array is run by one of them alone (all running
        ``y[i] = y[i] + s`` would add ``s`` once per thread that reads after another wrote),
        and before the split loop a barrier follows it (the others read what it wrote)."""
        if self.mapping.block_splits:
            self._block_body(body, copies, depth, guarded)
            return
        threads, scope, lead = self._sharing()
        if threads == 1:
            self.block(body, copies, depth, guarded)
            return
        pad = "  " * depth
        barrier = {"lanes": "__syncwarp();",
                   "group": f"__syncwarp(loclab_group_mask<{threads}>());"}.get(
                       scope, "__syncthreads();")
        before = True
        opened = False
        for node in body:
            split = self._is_split(node)
            if split and self.chunks > 1:  # (``cuda.chunks``)
                self.lines.append(f"{pad}bool {chunks.LAST};")
                self.statement(node, copies, depth, guarded)
                if node is not body[-1]:  # the rest of the iteration: the last block's
                    self.lines.append(f"{pad}if ({chunks.LAST}) {{")
                    depth, pad, opened = depth + 1, pad + "  ", True
                before = False
                continue
            if split or not written_arrays([node]):
                self.statement(node, copies, depth, guarded)
                before = before and not split
                continue
            self.lines.append(f"{pad}if ({lead}) {{")
            self.statement(node, copies, depth + 1, guarded)
            self.lines.append(f"{pad}}}")
            if before:
                self.lines.append(f"{pad}{barrier}")
        if opened:
            self.lines.append(f"{pad[:-2]}}}")

    # -- grid ---------------------------------------------------------------------------------
    def _axes(self) -> list[GridAxis]:
        out = []
        box: dict[str, tuple[str, str]] = {}
        for index, loop in enumerate(self.mapping.grid):
            start, stop, step = range_args(self.loops[id(loop)])
            low_start, high_start = _interval(start, box, self.where)
            low_stop, high_stop = _interval(stop, box, self.where)
            if abs(step) > 1 and names_in([start] if start is not None else []) & set(box):
                step = 1 if step > 0 else -1
            if step > 0:
                first = low_start
                count = f"max(0, -(-({high_stop} - ({first})) // {step}))"
                last_low, last_high = low_start, f"({high_stop}) - 1"
            else:
                first = high_start
                count = f"max(0, -(-(({first}) - ({low_stop})) // {-step}))"
                last_low, last_high = f"({low_stop}) + 1", high_start
            box[loop.var] = (last_low, last_high)
            out.append(GridAxis(loop.var, first, count, self.config.block[index],
                                self.config.tile[index], self.mapping.axis(loop), step))
        return out

    def _copies(self, grid_vars: list[str], locals_: set[str]) -> list[_Copy]:
        tiles = self.config.tile if self.mapping.grid else ()
        many = any(t > 1 for t in tiles)
        out = []
        for index in itertools.product(*(range(t) for t in tiles)):
            suffix = "_".join(map(str, index))
            rename = {}
            if many:
                rename = {v: f"{v}_{r}" for v, r in zip(grid_vars, index)}
                self.grid_names |= {f"{v}_{r}": (v, r) for v, r in zip(grid_vars, index)}
                rename |= {n: f"{n}_{suffix}" for n in locals_}
            out.append(_Copy(index, rename, f"ok_{suffix}" if suffix else "ok"))
        return out

    def _grid_values(self, axes: list[GridAxis], copies: list[_Copy], depth: int) -> None:
        pad = "  " * depth
        many = len(copies) > 1
        ix = self.index_type
        if self.mma is not None:
            warp, group, place = LANE_NAMES
            self.lines.append(f"{pad}const int {warp} = tid >> 5, {group} = (tid & 31) >> 2, "
                              f"{place} = tid & 3;")
        if self.warps is not None:
            warp, lane = WARP_LANES
            self.lines.append(f"{pad}const int {warp} = tid >> 5, {lane} = tid & 31;")
        for index, (axis, loop) in enumerate(zip(axes, self.mapping.grid)):
            a = AXES[axis.axis]
            span = axis.block * axis.tile
            step = axis.step
            for r in range(axis.tile):
                name = f"{axis.var}_{r}" if many else axis.var
                if r and self.warps is not None and axis.axis in (0, 1):
                    # a constant from the first: one register for all (the final stores
                    # would otherwise hold one per iteration across the whole loop)
                    step_ = self.warps.column_step if axis.axis == 0 else self.warps.row_step
                    self.lines.append(f"{pad}const {ix} t_{name} = t_{axis.var}_0 + "
                                      f"{step_(r)};")
                else:
                    self.lines.append(f"{pad}const {ix} t_{name} = b{a} * {span} + "
                                      f"{self._thread_offset(axis, r)};")
                self.lines.append(f"{pad}const {ix} {name} = first_{axis.var} + {step} * "
                                  f"t_{name};")
            if self.mma is not None and axis.axis == 0:  # the columns of B's fragments
                for n in range(self.mma.columns // 2):
                    name = f"{axis.var}_mma{n}"
                    self.lines.append(f"{pad}const {ix} t_{name} = b{a} * {span} + "
                                      f"{self.mma.b_column(n)};")
                    self.lines.append(f"{pad}const {ix} {name} = first_{axis.var} + "
                                      f"{step} * t_{name};")
        if not self.mapping.grid:
            self.lines.append(f"{pad}const bool ok = true;")
            return
        for copy_ in copies:
            checks = []
            translator = self.translator(copy_)
            for loop, r in zip(self.mapping.grid, copy_.index):
                name = copy_.rename.get(loop.var, loop.var)
                start, stop, step = range_args(self.loops[id(loop)])
                checks.append(f"t_{name} < count_{loop.var}")
                low = translator.expr(start) if start is not None else "0"
                high = translator.expr(stop)
                if step > 0:
                    checks += [f"{name} >= {low}", f"{name} < {high}"]
                else:
                    checks += [f"{name} <= {low}", f"{name} > {high}"]
                if abs(step) > 1:
                    checks.append(f"loclab_mod({name} - {low}, {abs(step)}) == 0")
            self.lines.append(f"{pad}const bool {copy_.ok} = {' && '.join(checks)};")

    def _thread_offset(self, axis: GridAxis, r: int) -> str:
        """Where the thread's ``r``-th iteration of a grid loop lies in its block's span (C
        text): ``r`` blocks of threads along, or the fragments' layout (``cuda.mma``)."""
        if self.mma is not None and axis.axis == 0:
            return self.mma.column(r)
        if self.mma is not None and axis.axis == 1:
            return self.mma.row(r)
        if self.warps is not None and axis.axis in (0, 1):
            return self.warps.column(r) if axis.axis == 0 else self.warps.row(r)
        return f"{r * axis.block} + threadIdx.{AXES[axis.axis]}"

    # -- statements ------------------------------------------------------------------------
    def translator(self, copy_: _Copy, values: dict[str, str] | None = None) -> Translator:
        return Translator(self.typing, self._subscript, self.where, copy_.rename,
                          {**copy_.registers, **(values or {})}, redirected=self.redirected)

    def block(self, body: Sequence[ast.stmt], copies: list[_Copy], depth: int,
              guarded: bool) -> None:
        for node in body:
            self.statement(node, copies, depth, guarded)

    def statement(self, node: ast.stmt, copies: list[_Copy], depth: int,
                  guarded: bool) -> None:
        pad = "  " * depth
        if isinstance(node, (ast.Pass, ast.Expr)) and not (
                isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant)):
            return
        if isinstance(node, ast.For):
            if self._uniform(node, copies) or self._hull(node) is not None:
                self.loop(node, copies, depth, guarded)
                return
            for copy_ in copies:
                self._open_guard(copy_, depth, guarded)
                self.loop(node, [copy_], depth + 1, False)
                self.lines.append(f"{pad}}}")
            return
        for copy_ in copies:
            translator = self.translator(copy_)
            if isinstance(node, ast.If):
                self._open_guard(copy_, depth, guarded)
                self.lines.append(f"{pad}  if ({translator.expr(node.test)}) {{")
                self.block(node.body, [copy_], depth + 2, False)
                if node.orelse:
                    self.lines.append(f"{pad}  }} else {{")
                    self.block(node.orelse, [copy_], depth + 2, False)
                self.lines.append(f"{pad}  }}")
                self.lines.append(f"{pad}}}")
                continue
            text = self._simple(node, translator)
            self.lines.append(f"{pad}if ({copy_.ok}) {text}" if guarded else f"{pad}{text}")

    def _atomic(self, node: ast.stmt, translator: Translator) -> str | None:
        """An update of an array the threads update together (``X[..] += v``, or ``X[..] =
        X[..] + v`` as the frontend reads it too) as an atomic add; None for any other
        statement."""
        if isinstance(node, ast.AugAssign):
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        else:
            return None
        if not (isinstance(target, ast.Subscript)
                and subscript_parts(target)[0] in self.mapping.atomics):
            return None
        kind = c_type(self.typing.arrays[subscript_parts(target)[0]])
        extremum = update_extremum(node)
        if extremum is not None:
            op, value = extremum
            return (f"loclab_atomic_{op}(&{translator.expr(target)}, "
                    f"({kind})({translator.expr(value)}));")
        increment = update_increment(node)
        if increment is None:
            raise translator.error(node, "an atomic update other than +, -, min and max")
        sign, value = increment
        return (f"loclab_atomic_add(&{translator.expr(target)}, "
                f"{sign}({translator.expr(value)}));")

    def _uniform(self, node: ast.For, copies: list[_Copy]) -> bool:
        """Whether every copy runs the loop over the same values (then it is jammed): its
        bounds read no name the copies rename differently (a triangle's ``k`` from ``i + 1``
        is jammed across a tile along ``j``, not across one along ``i``)."""
        return not any(len({c.rename.get(name, name) for c in copies}) > 1
                       for name in names_in([node.iter]))

    def _open_guard(self, copy_: _Copy, depth: int, guarded: bool) -> None:
        """``if (ok) {`` where this copy's validity is not known yet, else a plain block."""
        self.lines.append(f"{'  ' * depth}if ({copy_.ok}) {{" if guarded else
                          f"{'  ' * depth}{{")

    def _simple(self, node: ast.stmt, translator: Translator) -> str:
        atomic = self._atomic(node, translator)
        if atomic is not None:
            return atomic
        if isinstance(node, ast.Assign):
            value = translator.expr(node.value)
            if len(node.targets) == 1:
                return f"{translator.expr(node.targets[0])} = {value};"
            first = translator.expr(node.targets[0])
            rest = " ".join(f"{translator.expr(t)} = {first};" for t in node.targets[1:])
            return f"{{ {first} = {value}; {rest} }}"
        if isinstance(node, ast.AugAssign):
            target, value = node.target, translator.expr(node.value)
            op = ast.BinOp(left=target, op=node.op, right=node.value)
            ast.copy_location(op, node)
            if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr,
                                    ast.BitXor)):
                symbol = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.BitAnd: "&",
                          ast.BitOr: "|", ast.BitXor: "^"}[type(node.op)]
                return f"{translator.expr(target)} {symbol}= {value};"
            return f"{translator.expr(target)} = {translator.expr(op)};"
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            return f"{translator.expr(node.target)} = {translator.expr(node.value)};"
        raise translator.error(node, f"the statement {type(node).__name__}")

    def _bounds(self, node: ast.For, copies: list[_Copy]) -> tuple[str, str, str, int]:
        """A loop's variable, first value and bound in C (the first copy's), and step."""
        start, stop, step = range_args(node)
        translator = self.translator(copies[0])
        low = translator.expr(start) if start is not None else "0"
        return node.target.id, low, translator.expr(stop), step  # type: ignore[attr-defined]

    def loop(self, node: ast.For, copies: list[_Copy], depth: int, guarded: bool) -> None:
        pad = "  " * depth
        var, low, high, step = self._bounds(node, copies)
        before = copies
        stages = [s for s in self.staged.values()
                  if s.along == var and s.at == (node.lineno, node.col_offset)]
        # a triangle's loop (bounds moving with the grid loops): where copies have ranges of
        # their own or the block stages along it, it runs over the hull of the block's
        # ranges, each copy computing its own iterations alone
        hull = self._hull(node) if stages or not self._uniform(node, copies) else None
        runs = f"({hull[0]}) < ({hull[1]})" if hull is not None else \
            f"({low}) {'<' if step > 0 else '>'} ({high})"
        promoted, copies = self._promote(node, copies, depth, guarded, runs)
        if self._is_split(node):
            self._split(node, copies, depth, guarded, low, high)
            lead = self._sharing()[2]
            if self.chunks > 1:  # the last block alone holds the whole (``cuda.chunks``)
                lead = f"{lead} && {chunks.LAST}"
            self._store(promoted, before, copies, depth, guarded, runs, lead)
            return
        inner, inner_guarded, first, bound = copies, guarded, low, high
        if hull is not None:
            inner, inner_guarded, (first, bound) = self._own_ranges(node, copies, guarded), \
                True, hull
        if stages and any(self._prefetched(s) is not None for s in stages):
            # the registers a strip is prefetched into, in a scope of their own: a sibling
            # loop that stages the same array declares its own
            self.lines.append(f"{pad}{{")
            self._staged_loop(node, inner, depth + 1, inner_guarded, first, bound, stages)
            self.lines.append(f"{pad}}}")
        elif stages:
            self._staged_loop(node, inner, depth, inner_guarded, first, bound, stages)
        else:
            self.lines.append(f"{pad}{_for_header(var, first, bound, step)}")
            self.block(node.body, inner, depth + 1, inner_guarded)
            self.lines.append(f"{pad}}}")
        self._store(promoted, before, copies, depth, guarded, runs)

    def _own_ranges(self, node: ast.For, copies: list[_Copy], guarded: bool) -> list[_Copy]:
        """``copies``, each valid only inside its own range of ``node`` (run over a hull)."""
        out = []
        for copy_ in copies:
            var, low, high, _ = self._bounds(node, [copy_])
            mine = f"{var} >= ({low}) && {var} < ({high})"
            out.append(replace(copy_, ok=f"{copy_.ok} && {mine}" if guarded else mine))
        return out

    def _staged_loop(self, node: ast.For, copies: list[_Copy], depth: int, guarded: bool,
                     low: str, high: str, stages: list[_Stage]) -> None:
        """A loop along which arrays are staged in shared memory, strip by strip: each strip
        loaded (or stored from the registers it was prefetched into a strip ahead), then
        computed, a whole strip unrolled and the last, partial one as a plain loop."""
        pad = "  " * depth
        var = node.target.id  # type: ignore[attr-defined]
        strip = self.strip
        # stores through tiles only where the strip fills them: every iteration of the
        # block exists and runs the loop (else they go to memory as written)
        stored = [s for s in stages if s.writes] if not guarded and self.whole_block \
            and len(copies) == self.copy_count else []
        ringed = [s for s in stages if self._ringed(s)]
        if ringed:  # the loop inside the ring's scope
            self._ring_head(var, ringed, depth, low, high)
            depth += 1
            pad = "  " * depth
        else:
            ahead = [s for s in stages if self._prefetched(s) is not None]
            for stage in ahead:  # the first strip's share, into registers
                self._prefetch(stage, depth, f"({low})", declare=True)
            self.lines.append(f"{pad}for ({self.index_type} {var}0 = {low}; {var}0 < {high}; "
                              f"{var}0 += {strip}) {{")
            self.lines.append(f"{pad}  __syncthreads();")
            for stage in stages:
                if stage in ahead:
                    self._store_prefetched(stage, depth + 1)
                elif not stage.writes:
                    self._copy_tile(stage, depth + 1)
            self._copies_landed(depth + 1)
            self.lines.append(f"{pad}  __syncthreads();")
            if ahead:  # the next strip's loads are in flight while this one is computed
                self.lines.append(f"{pad}  if ({var}0 + {strip} < ({high})) {{")
                for stage in ahead:
                    self._prefetch(stage, depth + 2, f"{var}0 + {strip}", declare=False)
                self.lines.append(f"{pad}  }}")
        # a whole strip has a constant trip count: unrolled, its shared-memory offsets
        # become constants; the last, partial strip runs as a plain loop
        self.inside.add(var)
        self.open_at[var] = (node.lineno, node.col_offset)
        self.storing |= {stage.name for stage in stored}
        self.lines.append(f"{pad}  if ({var}0 + {strip} <= ({high})) {{")
        self.lines.append(f"{pad}    #pragma unroll")
        found = self._product_of(node, copies)
        if found is not None:
            self.lines.append(f"{pad}    for ({var} = {var}0; {var} < {var}0 + {strip}; "
                              f"{var} += {MMA_K}) {{")
            self._mma_step(var, found, copies, depth + 3)
        else:
            self.lines.append(f"{pad}    for ({var} = {var}0; {var} < {var}0 + {strip}; "
                              f"{var}++) {{")
            self._hoisted_block(node.body, copies, depth + 3, guarded)
        self.lines.append(f"{pad}    }}")
        self.lines.append(f"{pad}  }} else {{")
        self.lines.append(f"{pad}    for ({var} = {var}0; {var} < ({high}); {var}++) {{")
        self.block(node.body, copies, depth + 3, guarded)
        self.lines.append(f"{pad}    }}")
        self.lines.append(f"{pad}  }}")
        self.inside.discard(var)
        self.open_at.pop(var, None)
        self.storing -= {stage.name for stage in stored}
        if stored:  # the strip's stores, every thread's, copied out along rows
            self.lines.append(f"{pad}  __syncthreads();")
            for stage in stored:
                self._copy_tile(stage, depth + 1, high)
        self.lines.append(f"{pad}}}")
        if ringed:
            self.lines.append(f"{pad[:-2]}}}")
            for stage in ringed:
                self.slots.pop(stage.name)

    def _ring_head(self, var: str, ringed: list[_Stage], depth: int, low: str,
                   high: str) -> None:
        """The staged loop's head where its tiles are a ring (``cuda.pipeline``): the first
        ``ring - 1`` strips sent before the loop; at each strip, wait for its copies, one
        barrier (everyone's copies landed, and every thread is done with the slot the next
        copies go to), send the strip ``ring - 1`` ahead, compute from this strip's slot.
        Opens a scope (the strip counter's) that ``_staged_loop`` closes."""
        pad = "  " * depth
        ring, strip, turn = self.ring, self.strip, f"{var}_turn"
        self.lines.append(f"{pad}{{")
        self.lines.append(f"{pad}  __syncthreads();  // the ring's last use is over")
        for ahead in range(ring - 1):
            start = f"({low}) + {ahead * strip}"
            self.lines.append(f"{pad}  if ({start} < ({high})) {{")
            self._send(ringed, depth + 2, start, str(ahead))
            self.lines.append(f"{pad}  }}")
            self.lines.append(f"{pad}  loclab_copies_sent();")
        self.lines.append(f"{pad}  int {turn} = 0;")
        pad += "  "
        self.lines.append(f"{pad}for ({self.index_type} {var}0 = {low}; {var}0 < {high}; "
                          f"{var}0 += {strip}, {turn}++) {{")
        self.lines.append(f"{pad}  loclab_copies_pending<{ring - 2}>();")
        self.lines.append(f"{pad}  __syncthreads();")
        start = f"{var}0 + {(ring - 1) * strip}"
        self.lines.append(f"{pad}  if ({start} < ({high})) {{")
        self._send(ringed, depth + 3, start, f"({turn} + {ring - 1}) % {ring}")
        self.lines.append(f"{pad}  }}")
        self.lines.append(f"{pad}  loclab_copies_sent();")
        self.lines.append(f"{pad}  const int {var}_slot = {turn} % {ring};")
        for stage in ringed:
            self.slots[stage.name] = f"{var}_slot"

    def _send(self, ringed: list[_Stage], depth: int, start: str, slot: str) -> None:
        """Each thread's copies of the strip from ``start`` into the ring's ``slot``: 16
        bytes a copy where the tile's rows are the array's (``_grouped``), else one element
        a copy."""
        pad = "  " * depth
        for stage in ringed:
            size = self.typing.arrays[stage.array].itemsize
            if self._grouped(stage):
                for target, whole, source, elements in self._group_elements(stage, start):
                    self.lines.append(pad + pipeline.group_copy_line(
                        pipeline.ring_slot(slot, target), whole, source,
                        [pipeline.copy_line(pipeline.ring_slot(slot, t), g, stage.array, e,
                                            size) for t, g, e in elements]))
                continue
            for target, guard, source in self._prefetch_elements(stage, start):
                self.lines.append(pad + pipeline.copy_line(
                    pipeline.ring_slot(slot, target), guard, stage.array, source, size))

    def _grouped(self, stage: _Stage) -> bool:
        """Whether ``stage``'s strips are copied 16 bytes at a time: under the warp tiles
        (rows padded to whole 16-byte groups), a tile of 4-byte elements whose last
        dimension in shared memory is the array's last, moving, a whole number of groups
        wide, and the thread's share a whole number of groups."""
        live = self._storage(stage)
        if self.warps is None or not live or live[-1] != len(stage.dims) - 1 \
                or self.typing.arrays[stage.array].itemsize != 4:
            return False
        return self._prefetched(stage, VECTOR) is not None

    def _group_elements(self, stage: _Stage, start: str
                        ) -> list[tuple[str, str, str, list[tuple[str, str, str]]]]:
        """(shared-memory target, whether the whole group is inside its array and 16-byte
        aligned, global source, and each element's (target, guard, source) for a group that
        is not) of each group of 4 of a thread's share of the strip from ``start``."""
        out = []
        last = len(stage.dims) - 1
        aligned = f"{stage.array}_aligned"
        for places, values in self._share(stage, start, VECTOR):
            rows = self._inside(stage.array, values[:-1])
            column, extent = values[-1], f"{stage.array}_n{last}"
            whole = (f"{aligned} && {rows + ' && ' if rows else ''}({column}) % {VECTOR} == 0 "
                     f"&& {column} >= 0 && ({column}) + {VECTOR - 1} < {extent}")
            elements = []
            for e in range(VECTOR):
                moved = [*values[:-1], f"({column} + {e})"]
                elements.append((_tile_at(stage.name, [*places[:-1], f"{places[-1]} + {e}"]),
                                 self._inside(stage.array, moved),
                                 f"{stage.array}[{self._flatten(stage.array, moved)}]"))
            out.append((_tile_at(stage.name, places), whole,
                        f"{stage.array}[{self._flatten(stage.array, values)}]", elements))
        return out

    def _ring_depth(self) -> int:
        """Tiles in each ring (``cuda.pipeline``), 0 for none: only where the config asks
        and every tile read along a loop has a whole share a thread and an element size
        cp.async copies, and the ring fits shared memory."""
        along = [s for s in self.staged.values() if _read_along(s)]
        if not self.config.pipelined or not along or any(
                self._prefetched(s) is None
                or self.typing.arrays[s.array].itemsize not in pipeline.COPY_BYTES
                for s in along):
            return 0
        others = [s for s in self.staged.values() if s not in along]
        return pipeline.ring_depth([self._shared_bytes([s]) for s in along],
                                   self._shared_bytes(others),
                                   SHARED_LIMIT if self.warps is None else DYNAMIC_LIMIT)

    def _dynamic_bytes(self) -> int:
        """Bytes of the ring held in dynamic shared memory: all of it where, under the warp
        tiles, the ring and the other tiles pass the static limit; else 0 (static)."""
        ringed = [s for s in self.staged.values() if self._ringed(s)]
        ring = self.ring * self._shared_bytes(ringed)
        if not ringed or ring + self._shared_bytes(
                [s for s in self.staged.values() if s not in ringed]) <= SHARED_LIMIT:
            return 0
        return ring

    def _ringed(self, stage: _Stage) -> bool:
        return self.ring > 0 and _read_along(stage)

    def _split(self, node: ast.For, copies: list[_Copy], depth: int, guarded: bool,
               low: str, high: str) -> None:
        """The loop shared by a warp's lanes (or a block's, for few long iterations; or the
        block's rows): thread l runs iterations l, l + threads, ...; each reduction (a scalar,
        or an element in a register) starts at its value on the first thread and at the
        operator's identity on the others (min, max, and, or keep theirs: they are
        idempotent), and shuffles (and shared memory, across warps) combine the threads'
        results, every thread left holding the whole."""
        pad = "  " * depth
        var = node.target.id  # type: ignore[attr-defined]
        threads, scope, _ = self._sharing()
        if threads == 1:  # a row split of one row: the loop as written
            self.lines.append(f"{pad}for ({var} = {low}; {var} < ({high}); {var}++) {{")
            self.block(node.body, copies, depth + 1, guarded)
            self.lines.append(f"{pad}}}")
            return
        place = "threadIdx.y" if scope == "rows" else "threadIdx.x"
        targets = [(copy_.registers.get(name) or copy_.rename.get(name, name), name, op)
                   for copy_ in copies for name, op in self._split_reductions(node) or ()]
        kinds = [c_type(self._held_type(name)) for _, name, _ in targets]
        first, start, stride = f"{place} != 0", f"({low}) + {place}", str(threads)
        if self.chunks > 1:  # block c's share starts c * threads along (``cuda.chunks``)
            first = f"{first} || blockIdx.x != 0"
            start = f"{start} + ({self.index_type})blockIdx.x * {threads}"
            stride = f"{threads} * ({self.index_type})gridDim.x"
        for (target, _, op), kind in zip(targets, kinds):
            identity = LANE_IDENTITY.get(op)
            if identity is not None:
                self.lines.append(f"{pad}if ({first}) {target} = ({kind}){identity};")
        self.lines.append(f"{pad}#pragma unroll 4")
        self.lines.append(f"{pad}for ({var} = {start}; {var} < ({high}); "
                          f"{var} += {stride}) {{")
        self.block(node.body, copies, depth + 1, guarded)
        self.lines.append(f"{pad}}}")
        for target, _, op in targets:
            width = f"<{threads}>" if scope == "group" else ""
            self.lines.append(f"{pad}{target} = "
                              f"loclab_{scope}_{LANE_COMBINE[op]}{width}({target});")
        if self.chunks > 1:
            counts = [(f"t_{g.var}", f"count_{g.var}") for g in self.mapping.grid]
            self.lines.append(f"{pad}const {self.index_type} {chunks.ITERATION} = "
                              f"{chunks.iteration(counts)};")
            self.lines += chunks.combined(
                [(target, kind, LANE_COMBINE[op])
                 for (target, _, op), kind in zip(targets, kinds)], pad)

    def _hoisted_block(self, body: Sequence[ast.stmt], copies: list[_Copy], depth: int,
                       guarded: bool) -> None:
        """A whole strip's body for every copy, each distinct element of a staged tile read
        once into a register first (the copies of a register tile share them: one load
        serves a row or a column of the tile). Only where every copy is valid: then every
        index is inside the tile, so a read moved before a condition is still safe."""
        if guarded or len(copies) == 1:
            self.block(body, copies, depth, guarded)
            return
        outer, self.lines, self.hoisting = self.lines, [], {}
        try:
            self.block(body, copies, depth, guarded)
            statements, hoisted = self.lines, self.hoisting
        finally:
            self.lines, self.hoisting = outer, None
        pad = "  " * depth
        self.lines += [f"{pad}const {kind} {name} = {text};"
                       for text, (name, kind) in hoisted.items()]
        self.lines += statements

    # -- products: tensor cores, warp tiles ------------------------------------------------
    def _choose_products(self, body: list[ast.stmt], locals_: set[str]) -> None:
        """The layout of the thread's iterations and the loops that are products (before the
        staging, whose tiles the layout pads and orders): each uniform loop whose body is a
        product (``mma.product``) into an element kept in a register or into a scalar of
        the thread's, its factors reading no scalar the thread assigns. Products of doubles
        take the fragments' layout (they run on the tensor cores); else products of
        4-byte floats the warp tiles' (``cuda.warp_layout``)."""
        layouts = ((layout_for(self.mapping, self.config), np.float64),
                   (warp_layout_for(self.mapping, self.config), np.float32))
        self.mma, self.warps, self.products = None, None, {}
        axes = {self.mapping.axis(g): g.var for g in self.mapping.grid}
        for layout, kind in layouts:
            if layout is None:
                continue
            for loop in uniform_loops(body, set(axes.values()) | locals_):
                found = product(loop, axes[1], axes[0])
                if found is None or not self._accumulates(found, loop, locals_, kind) \
                        or names_in(found.factors()) & locals_ \
                        or any(id(sub) in self.redirected for sub in subscripts([loop])):
                    continue
                self.products[(loop.lineno, loop.col_offset)] = (loop, found)
            if self.products:
                if isinstance(layout, MmaLayout):
                    self.mma = layout
                else:
                    self.warps = layout
                return

    def _accumulates(self, found: Product, loop: ast.For, locals_: set[str],
                     kind: type) -> bool:
        """Whether ``found``'s target is a ``kind`` of each iteration's own: a scalar the
        thread assigns, or an element kept in a register across ``loop``."""
        if found.scalar:
            return found.name in locals_ and self.typing.scalars.get(found.name) == kind
        return self.typing.arrays.get(found.name) == kind \
            and found.name not in self.mapping.atomics \
            and found.name in promotable(loop, self.redirected)

    def _keep_staged_products(self) -> bool:
        """The products whose every factor reads tiles in shared memory (the fragments read
        other iterations' elements: from a tile, always inside it); no layout without one.
        Whether a layout was dropped."""
        def staged(loop: ast.For, sub: ast.Subscript) -> bool:
            stage = self._stage_serving(*subscript_parts(sub))
            return stage is not None and (not stage.along or stage.at == (
                loop.lineno, loop.col_offset))

        self.products = {at: (loop, found) for at, (loop, found) in self.products.items()
                         if all(staged(loop, sub) for sub in subscripts(found.factors()))}
        if self.products or (self.mma is None and self.warps is None):
            return False
        self.mma = self.warps = None
        return True

    def _product_of(self, node: ast.For, copies: list[_Copy]) -> Product | None:
        """The product ``node`` runs on the tensor cores, where it does: a strip a whole
        number of instructions deep, every iteration of the thread jammed, each with its
        own register."""
        if self.mma is None or self.strip % MMA_K:
            return None
        _, found = self.products.get((node.lineno, node.col_offset), (None, None))
        if found is None or len(copies) != self.mma.rows * self.mma.columns:
            return None
        registers = [_accumulator(c, found) for c in copies]
        if None in registers or len(set(registers)) != len(registers):
            return None
        return found

    def _mma_step(self, var: str, found: Product, copies: list[_Copy], depth: int) -> None:
        """``MMA_K`` iterations of ``var`` for every iteration of the thread: per product,
        each lane's A values (the rows' factor at ``var + t``) and B values (the columns'
        factor there, at the columns of B's fragments), then one instruction per 16 x 8
        slice of the warp's tile."""
        assert self.mma is not None
        pad = "  " * depth
        axes = {self.mapping.axis(g): index for index, g in enumerate(self.mapping.grid)}
        x_var = self.mapping.grid[axes[0]].var
        place = LANE_NAMES[2]

        def at(r: int, c: int) -> _Copy:
            return next(cp for cp in copies if cp.index[axes[1]] == r and cp.index[axes[0]] == c)

        shifted = {var: f"({var} + {place})"}
        self.used_mma = True
        for q, term in enumerate(found.terms):
            sign = "-" if term.negate else ""
            for r in range(self.mma.rows):
                value = self.translator(at(r, 0), shifted).expr(term.rows)
                self.lines.append(f"{pad}const double mma_a{q}_{r} = {sign}({value});")
            for n in range(self.mma.columns // 2):
                values = {**shifted, x_var: f"{x_var}_mma{n}"}
                value = self.translator(at(0, 0), values).expr(term.columns)
                self.lines.append(f"{pad}const double mma_b{q}_{n} = {value};")
            for m, n in itertools.product(range(self.mma.rows // 2),
                                          range(self.mma.columns // 2)):
                c = [_accumulator(at(2 * m + dr, 2 * n + dc), found)
                     for dr, dc in ((0, 0), (0, 1), (1, 0), (1, 1))]
                self.lines.append(f"{pad}loclab_dmma({', '.join(c)}, mma_a{q}_{2 * m}, "
                                  f"mma_a{q}_{2 * m + 1}, mma_b{q}_{n});")

    # -- staging ---------------------------------------------------------------------------
    def _stages(self, body: list[ast.stmt], read_only: set[str], locals_: set[str]) -> None:
        """Which read-only arrays each uniform loop of the thread code stages (see module):
        at the configured strip, or the largest smaller one at which every tile fits in
        shared memory (tiles that still do not fit are read directly)."""
        self.staged = {}
        if not self.config.stage or not self.mapping.grid:
            return
        wanted = self.config.strip
        while True:
            self._stages_at(body, read_only, locals_, fit=False)
            if self._shared_bytes(list(self.staged.values())) <= SHARED_LIMIT \
                    or self.strip <= 4:
                break
            self.strip //= 2
        if self._shared_bytes(list(self.staged.values())) > SHARED_LIMIT:
            self._stages_at(body, read_only, locals_, fit=True)
        self.strip = self.strip if self.staged else wanted

    def _stages_at(self, body: list[ast.stmt], read_only: set[str], locals_: set[str],
                   fit: bool) -> None:
        """Each read-only array's reads grouped by the loops their subscripts move with
        (syrk's ``A[i, k]`` and ``A[j, k]``: rows of the block's ``i`` and of its ``j``),
        each group a tile of its own."""
        self.staged = {}
        grid = {g.var: g for g in self.mapping.grid}
        x_var = self.mapping.x.var if self.mapping.x is not None else None
        names = set(self.typing.arrays)
        for (name, _), forms in read_forms(body, read_only, self.redirected).items():
            stage = self._stage_of(name, forms, "", grid, None, x_var)
            if stage is not None and (not fit or self._fits(stage)):
                self._add_stage(stage, names)
        for loop in self._stageable_loops(body, locals_):
            var = loop.target.id  # type: ignore[attr-defined]
            start, _, step = range_args(loop)
            if step != 1:
                continue
            staged = {(s.array, s.form) for s in self.staged.values()}
            for (name, form), forms in read_forms(loop.body, read_only, self.redirected).items():
                if (name, form) in staged:
                    continue
                stage = self._stage_of(name, forms, var, grid, start, x_var)
                if stage is not None and (not fit or self._fits(stage)):
                    self._add_stage(replace(stage, at=(loop.lineno, loop.col_offset)), names)
            for name, form in self._storable(loop, body).items():
                stage = self._stage_of(name, [form], var, grid, start, x_var, writes=True)
                if stage is None:
                    continue
                stage = replace(stage, at=(loop.lineno, loop.col_offset))
                stage = replace(stage, within=self._in_place(stage, loop))
                if not fit or self._fits(stage):
                    self._add_stage(stage, names)

    def _in_place(self, stage: _Stage, loop: ast.For) -> str:
        """The read tile whose cells the written ``stage`` may take over (its name), or "".

        Why: the coalescing lesson's row walk reads ``a[i, j]`` and stores ``out[i, j]``;
        two tiles of a block's whole rows do not fit shared memory, one does (the
        hand-written kernel walks its rows in place). Legal where both tiles have one
        subscript each, the same (every cell then belongs to one iteration, which reads it
        before it stores into it: nothing after the store in ``loop``'s body reads the
        array), elements of one size, and no other written tile in those cells."""
        def single(tile: _Stage) -> bool:
            return all(low == high for _, low, high in tile.dims)

        size = self.typing.arrays[stage.array].itemsize
        taken = {tile.within for tile in self.staged.values()}
        for tile in self.staged.values():
            if tile.writes or tile.name in taken or tile.along != stage.along \
                    or tile.at != stage.at \
                    or tile.dims != stage.dims or not single(tile) \
                    or self.typing.arrays[tile.array].itemsize != size:
                continue
            store = next(n for n in loop.body if isinstance(n, ast.Assign)
                         and isinstance(n.targets[0], ast.Subscript)
                         and subscript_parts(n.targets[0])[0] == stage.array)
            later = loop.body[loop.body.index(store) + 1:]
            if tile.array not in {subscript_parts(sub)[0] for sub in reads(later)}:
                return tile.name
        return ""

    def _storable(self, loop: ast.For, body: Sequence[ast.stmt]
                  ) -> dict[str, tuple[Offset | None, ...]]:
        """The arrays whose stores in ``loop`` (one of ``_stageable_loops``) may go through a
        tile (``write_stages``): none where threads share iterations (split loops: one
        thread writes) or where the loop runs over a hull (each copy its own range: no
        whole tile)."""
        if self._sharing()[0] != 1 or self.mapping.block_splits \
                or self._hull(loop) is not None:
            return {}
        return {name: form for name, form in write_stages(loop, body).items()
                if name not in self.mapping.atomics}

    def _stageable_loops(self, body: Sequence[ast.stmt], locals_: set[str]
                         ) -> Iterator[ast.For]:
        """Loops of the thread code a block may stage along: their bounds the same in every
        thread, or moving with grid loops as ``_hull`` covers."""
        grid = {g.var for g in self.mapping.grid}
        for node in body:
            if isinstance(node, ast.For):
                names = names_in([node.iter])
                if not names & (grid | locals_) or (not names & locals_
                                                    and self._hull(node) is not None):
                    yield node
                    yield from self._stageable_loops(node.body, locals_)

    def _hull(self, node: ast.For) -> tuple[str, str] | None:
        """(first, bound) in C covering the ranges of ``node`` in every thread of a block,
        where its bounds move with grid loops (a triangle's ``k`` from ``i + 1``): each a
        size expression or ``g + c``, ``g`` a grid loop of step 1; None for a loop whose
        bounds are the same in every thread, or of another form."""
        start, stop, step = range_args(node)
        grid = {g.var: index for index, g in enumerate(self.mapping.grid)}
        if step != 1 or not names_in([node.iter]) & set(grid):
            return None
        plain = self.translator(_Copy((), {}, ""))
        hull = []
        for bound, last in ((start, False), (stop, True)):
            if bound is None or not names_in([bound]) & set(grid):
                hull.append(plain.expr(bound) if bound is not None else "0")
                continue
            offset = offset_of(bound)
            if offset is None or offset.var not in grid \
                    or range_args(self.loops[id(self.mapping.grid[grid[offset.var]])])[2] != 1:
                return None
            index = grid[offset.var]
            span = self.config.block[index] * self.config.tile[index]
            hull.append(f"({self._base(offset.var, '')} + {span - 1 if last else 0} + "
                        f"{offset.offset})")
        return hull[0], hull[1]

    def _add_stage(self, stage: _Stage, taken: set[str]) -> None:
        """``stage`` kept, named ``s_A`` for array ``A``'s first tile and ``s_A_1``, ... for
        its others (never another array's or tile's name)."""
        key, count = stage.array, 0
        while key in self.staged or (key != stage.array and key in taken):
            count += 1
            key = f"{stage.array}_{count}"
        self.staged[key] = replace(stage, name=f"s_{key}")

    def _stage_serving(self, name: str, indices: list[ast.expr]) -> _Stage | None:
        """The tile that holds the read ``name[indices]``, if one does."""
        offsets = [offset_of(i) for i in indices]
        if any(o is None for o in offsets):
            return None
        form = tuple(o.var for o in offsets)  # type: ignore[union-attr]
        return next((s for s in self.staged.values() if s.array == name and s.form == form),
                    None)

    def _stage_of(self, name: str, forms: list[tuple[Offset | None, ...]], var: str,
                  grid: dict[str, Loop], start: ast.expr | None,
                  x_var: str | None, writes: bool = False) -> _Stage | None:
        """The tile of ``name`` staged along loop ``var`` ("": for the whole body), where
        every read of it is ``var``/grid loop + constant per dimension, and threads share
        the tile or would not read it coalesced; else None. A store (``writes``) is staged
        only to coalesce, and only where it moves with every grid loop (distinct threads,
        distinct elements: the tile is the block's alone)."""
        if any(o is None for form in forms for o in form) or len(
                {len(form) for form in forms}) != 1:
            return None
        dims = []
        for d in range(len(forms[0])):
            vars_ = {form[d].var for form in forms}  # type: ignore[union-attr]
            if len(vars_) != 1:
                return None
            v = vars_.pop()
            if v is not None and v != var and v not in grid:
                return None
            offsets = [form[d].offset for form in forms]  # type: ignore[union-attr]
            low = min(offsets)
            if v is not None and not self._nonnegative(v, var, start, grid, low):
                return None
            dims.append((v, low, max(offsets)))
        used = [d[0] for d in dims if d[0] is not None]
        if (var and var not in used) or not used or len(used) != len(set(used)):
            return None
        shared = bool(var) and any(g not in used for g in grid)
        last = next((d[0] for d in reversed(dims) if d[0] is not None), None)
        uncoalesced = last != x_var and x_var in used
        if writes and not (var and uncoalesced and set(grid) <= set(used)):
            return None
        if not (shared or uncoalesced):
            return None
        return _Stage(name, tuple(dims), f"s_{name}", var, writes=writes)

    def _nonnegative(self, v: str, var: str, start: ast.expr | None,
                     grid: dict[str, Loop], offset: int) -> bool:
        """Whether ``v + offset`` is never negative (staging loads no wrapped element)."""
        if v == var:
            first = start
        else:
            first, _, step = range_args(self.loops[id(grid[v])])
            if step != 1:
                return False
        value = self._lowest(first, grid, {v})
        return value is not None and value + offset >= 0

    def _lowest(self, first: ast.expr | None, grid: dict[str, Loop],
                seen: set[str]) -> int | None:
        """The least first value of a loop that starts at ``first``: a constant, or a grid
        loop's variable plus one (covariance's ``j`` from ``i``); None where unknown."""
        if first is None:
            return 0
        offset = offset_of(first)
        if offset is None:
            return None
        if offset.var is None:
            return offset.offset
        if offset.var not in grid or offset.var in seen:
            return None
        start, _, step = range_args(self.loops[id(grid[offset.var])])
        low = self._lowest(start, grid, seen | {offset.var}) if step == 1 else None
        return None if low is None else low + offset.offset

    def _spans(self, var: str) -> dict[str, int]:
        spans = {var: self.strip} if var else {}
        for g, b, t in zip(self.mapping.grid, self.config.block, self.config.tile):
            spans[g.var] = b * t
        return spans

    def _tile_shape(self, stage: _Stage) -> list[int]:
        spans = self._spans(stage.along)
        shape = [stage.extent(spans, d) for d in self._storage(stage)]
        if len(shape) >= 2:
            shape[-1] += shared_pad(shape[-1]) if self.mma is not None else \
                vector_pad(shape[-1]) if self.warps is not None else PAD
        return shape

    def _storage(self, stage: _Stage) -> list[int]:
        """The tile's dimensions (those that move) in the order shared memory holds them:
        as the array's, but under the warp tiles a read tile of a grid loop on x or y and the
        loop it is staged along (``A[i, k]``, syrk's ``A[j, k]``) is held transposed, so that
        a thread's group of 4 iterations reads one 16-byte vector (``cuda.warp_layout``)."""
        live = [d for d, dim in enumerate(stage.dims) if dim[0] is not None]
        if self.warps is None or stage.writes or stage.within or len(live) != 2 \
                or any(tile.within == stage.name for tile in self.staged.values()):
            return live
        first, last = (stage.dims[d][0] for d in live)
        planar = {g.var for g in self.mapping.grid if self.mapping.axis(g) <= 1}
        return live[::-1] if first in planar and last == stage.along else live

    def _vector_dim(self, stage: _Stage) -> str | None:
        """The grid loop whose groups of 4 iterations read 16-byte vectors of ``stage``'s
        tile, where one does: under the warp tiles, the tile's last dimension in shared
        memory moves with the grid loop on x or y, of step 1, at one offset, and its
        elements are 4-byte numbers."""
        live = self._storage(stage)
        if self.warps is None or not live or stage.writes \
                or c_type(self.typing.arrays[stage.array]) not in VECTOR_TYPES:
            return None
        var, low, high = stage.dims[live[-1]]
        loop = next((g for g in self.mapping.grid if g.var == var), None)
        if loop is None or self.mapping.axis(loop) > 1 or low != high \
                or range_args(self.loops[id(loop)])[2] != 1:
            return None
        return var

    def _fits(self, stage: _Stage) -> bool:
        return self._shared_bytes([*self.staged.values(), stage]) <= SHARED_LIMIT

    def _shared_bytes(self, stages: list[_Stage]) -> int:
        total = 0
        for stage in stages:
            if stage.within:
                continue
            count = 1
            for extent in self._tile_shape(stage):
                count *= extent
            total += count * self.typing.arrays[stage.array].itemsize
        return total

    def _copy_tile(self, stage: _Stage, depth: int, high: str = "") -> None:
        """Every thread of the block copies its share of the tile, last dimension fastest
        (consecutive threads, consecutive addresses): a read tile from memory (outside the
        array it holds 0; by cp.async where the config pipelines, waited for by
        ``_copies_landed``: every copy in flight at once, no registers), a written one to
        memory (the elements of the strip's iterations, those before the loop's bound
        ``high``, that are inside the array)."""
        pad = "  " * depth
        var = stage.along
        spans = self._spans(var)
        live = [d for d, dim in enumerate(stage.dims) if dim[0] is not None]
        extents = [stage.extent(spans, d) for d in live]
        total = 1
        for extent in extents:
            total *= extent
        flat = "tid"
        threads, width = self.config.threads, extents[-1]
        local: dict[int, str] = {}
        if threads % width == 0:
            # each thread keeps one column of the tile: its index math is done once, and the
            # loop over rows strides by whole rows (one add per element)
            self.lines.append(f"{pad}{{")
            self.lines.append(f"{pad}  const int column = {flat} % {width};")
            self.lines.append(f"{pad}  #pragma unroll")
            self.lines.append(f"{pad}  for (int e = {flat} / {width}; e < {total // width}; "
                              f"e += {threads // width}) {{")
            local[live[-1]] = "column"
            rest = "e"
            for d, extent in reversed(list(zip(live[:-1], extents[:-1]))):
                local[d] = f"({rest}) % {extent}"
                rest = f"({rest}) / {extent}"
            pad += "  "
        else:
            self.lines.append(f"{pad}for (int e = {flat}; e < {total}; e += {threads}) {{")
            rest = "e"
            for d, extent in reversed(list(zip(live, extents))):
                local[d] = f"({rest}) % {extent}"
                rest = f"({rest}) / {extent}"
        values = []
        for d, (v, low, _) in enumerate(stage.dims):
            values.append(str(low) if v is None else
                          f"({self._base(v, var)} + {low} + {local[d]})")
        inside = self._inside(stage.array, values)
        tile = self._cells(stage) + "".join(f"[{local[d]}]" for d in self._storage(stage))
        element = f"{stage.array}[{self._flatten(stage.array, values)}]"
        if stage.writes:
            ran = " && ".join(f"{var}0 + {local[d]} < ({high})"
                              for d, dim in enumerate(stage.dims) if dim[0] == var)
            self.lines.append(f"{pad}  if ({ran} && {inside}) {element} = {tile};")
        elif self.config.pipelined and \
                self.typing.arrays[stage.array].itemsize in pipeline.COPY_BYTES:
            self.lines.append(f"{pad}  " + pipeline.copy_line(
                tile, inside, stage.array, element, self.typing.arrays[stage.array].itemsize))
            self.sent = self.copied_async = True
        else:
            self.lines.append(f"{pad}  {tile} = ({inside}) ? {element} : 0;")
        self.lines.append(f"{pad}}}")
        if threads % width == 0:
            self.lines.append(f"{pad[:-2]}}}")

    def _copies_landed(self, depth: int) -> None:
        """Wait for the tiles' copies sent since the last wait (before the barrier that
        lets every thread read them)."""
        if self.sent:
            pad = "  " * depth
            self.lines.append(f"{pad}loclab_copies_sent();")
            self.lines.append(f"{pad}loclab_copies_pending<0>();")
            self.sent = False

    def _prefetched(self, stage: _Stage, group: int = 1
                    ) -> tuple[int, int, list[int], list[int]] | None:
        """(groups a row, rows a pass, live dimensions, extents) where each thread's share of
        a strip is a whole number of groups of ``group`` elements of one column of groups,
        at most ``PREFETCH_LIMIT`` elements: then that share is loaded into registers a
        strip ahead, or copied into a ring; else None (loaded when needed)."""
        if stage.writes:
            return None
        spans = self._spans(stage.along)
        live = [d for d, dim in enumerate(stage.dims) if dim[0] is not None]
        extents = [stage.extent(spans, d) for d in live]
        threads, width = self.config.threads, extents[-1]
        total = 1
        for extent in extents:
            total *= extent
        if width % group:
            return None
        units = width // group
        if threads % units or (total // width) % (threads // units) \
                or total // threads > PREFETCH_LIMIT:
            return None
        return units, threads // units, live, extents

    def _prefetch_elements(self, stage: _Stage, start: str) -> list[tuple[str, str, str]]:
        """(shared-memory target, guard, global source) of each element of a thread's share
        of the strip that starts at ``start``."""
        return [(_tile_at(stage.name, places), self._inside(stage.array, values),
                 f"{stage.array}[{self._flatten(stage.array, values)}]")
                for places, values in self._share(stage, start, 1)]

    def _share(self, stage: _Stage, start: str, group: int
               ) -> list[tuple[list[str], list[str]]]:
        """(its place in the tile, dimension by dimension in shared memory's order; the
        array's index per dimension) of the first element of
        each group of ``group`` in a thread's share of the strip from ``start``: the last
        dimension fastest across threads (consecutive threads, consecutive addresses)."""
        units, step, live, extents = self._prefetched(stage, group)  # type: ignore[misc]
        flat = "tid"
        rows = 1
        for extent in extents[:-1]:
            rows *= extent
        out = []
        for r in range(rows // step):
            rest = f"({flat} / {units} + {r * step})"
            local = {live[-1]: f"{flat} % {units}" if group == 1
                     else f"({flat} % {units}) * {group}"}
            for d, extent in reversed(list(zip(live[:-1], extents[:-1]))):
                local[d] = f"{rest} % {extent}"
                rest = f"{rest} / {extent}"
            values = [str(low) if v is None else
                      f"({self._base(v, stage.along, start)} + {low} + {local[d]})"
                      for d, (v, low, _) in enumerate(stage.dims)]
            out.append(([local[d] for d in self._storage(stage)], values))
        return out

    @staticmethod
    def _inside(array: str, values: list[str]) -> str:
        """C text: every index of ``values`` within ``array``'s extents."""
        return " && ".join(f"{value} >= 0 && {value} < {array}_n{d}"
                           for d, value in enumerate(values))

    def _prefetch(self, stage: _Stage, depth: int, start: str, declare: bool) -> None:
        pad = "  " * depth
        kind = c_type(self.typing.arrays[stage.array])
        for r, (_, guard, source) in enumerate(self._prefetch_elements(stage, start)):
            register = f"p_{stage.key}_{r}"
            self.lines.append(f"{pad}{kind + ' ' if declare else ''}{register} = ({guard}) ? "
                              f"{source} : 0;")

    def _store_prefetched(self, stage: _Stage, depth: int) -> None:
        pad = "  " * depth
        for r, (target, _, _) in enumerate(self._prefetch_elements(stage, "0")):
            self.lines.append(f"{pad}{target} = p_{stage.key}_{r};")

    def _base(self, v: str, var: str, start: str | None = None) -> str:
        """The first value of ``v`` in this block's tile (the staged loop's: ``start``, by
        default ``var0``, the strip being computed)."""
        if v == var:
            return start or f"{var}0"
        index = [g.var for g in self.mapping.grid].index(v)
        span = self.config.block[index] * self.config.tile[index]
        axis = AXES[self.mapping.axis(self.mapping.grid[index])]
        return f"(first_{v} + b{axis} * {span})"

    def _stage_text(self, stage: _Stage) -> str:
        shape = "x".join(map(str, self._tile_shape(stage)))
        where = f"along {stage.along}" if stage.along else "once per block"
        if stage.writes:
            where = f"stored along {stage.along}"
        what = stage.array
        if sum(s.array == stage.array for s in self.staged.values()) > 1:
            what += "[" + ", ".join(v or str(low) for v, low, _ in stage.dims) + "]"
        if stage.within:
            host = next(s for s in self.staged.values() if s.name == stage.within)
            return f"{what} {where} (in place of {host.array}'s tile)"
        return f"{what} {where} ({shape} tile in shared memory)"

    # -- subscripts ------------------------------------------------------------------------
    def _subscript(self, name: str, indices: list[ast.expr], translator: Translator) -> str:
        stage = self._stage_serving(name, indices)
        if stage is not None and stage.writes:  # never read: this is the store
            if stage.name in self.storing:
                return self._tile_element(stage, indices, translator)
        elif stage is not None:
            var = stage.along
            if var in self.inside and (not var or self.open_at.get(var) == stage.at):
                text = self._tile_element(stage, indices, translator)
                if self.hoisting is None:
                    return text
                vector = self._vector_read(stage, indices, translator)
                if vector is not None:
                    text, kind, place = vector
                    if text not in self.hoisting:
                        self.hoisting[text] = (f"h{len(self.hoisting)}", kind)
                    return f"{self.hoisting[text][0]}.{COMPONENTS[place]}"
                if text not in self.hoisting:
                    self.hoisting[text] = (f"h{len(self.hoisting)}",
                                           c_type(self.typing.arrays[name]))
                return self.hoisting[text][0]
        if name in translator.values and [ast.unparse(i) for i in indices] == \
                self.in_register.get(name, [ast.unparse(i) for i in indices]):
            return translator.values[name]
        if len(indices) != self.typing.ndims.get(name, len(indices)):
            raise translator.error(indices[0] if indices else ast.Name(id=name),
                                   f"a subscript of {name} with {len(indices)} indices "
                                   f"(it has {self.typing.ndims.get(name)} dimensions)")
        values = []
        indexing = replace(translator, index=True)
        for d, index in enumerate(indices):
            value = indexing.expr(index)
            if not self._surely_nonnegative(index):
                value = f"loclab_wrap({value}, {name}_n{d})"
            values.append(value)
        return f"{name}[{self._flatten(name, values)}]"

    def _tile_element(self, stage: _Stage, indices: list[ast.expr],
                      translator: Translator) -> str:
        """The element of ``stage``'s tile that ``indices`` name."""
        parts = {}
        for d, (index, (v, low, _)) in enumerate(zip(indices, stage.dims)):
            if v is not None:
                value = replace(translator, index=True).expr(index)
                parts[d] = f"[({value}) - {self._base(v, stage.along)} - {low}]"
        return f"{self._cells(stage)}{''.join(parts[d] for d in self._storage(stage))}"

    def _vector_read(self, stage: _Stage, indices: list[ast.expr],
                     translator: Translator) -> tuple[str, str, int] | None:
        """(the 16-byte vector of ``stage``'s tile, its C type, this element's place in it)
        where the element is one of a thread's group of 4 (``_vector_dim``): the same
        element of the group's first iteration, read as a vector."""
        var = self._vector_dim(stage)
        name = translator.rename.get(var, "") if var is not None else ""
        if name not in self.grid_names:
            return None
        r = self.grid_names[name][1]
        first = f"{var}_{r - r % VECTOR}"
        element = self._tile_element(
            stage, indices, replace(translator, rename={**translator.rename, var: first}))
        kind = VECTOR_TYPES[c_type(self.typing.arrays[stage.array])]
        return f"*reinterpret_cast<const {kind}*>(&{element})", kind, r % VECTOR

    def _cells(self, stage: _Stage) -> str:
        """The shared array holding ``stage``'s tile: its own, or the read tile it took
        over (``_in_place``); a ring's slot being computed where the tile is ringed."""
        name = stage.within or stage.name
        return f"{name}[{self.slots[name]}]" if name in self.slots else name

    def _flatten(self, name: str, values: list[str]) -> str:
        text = values[0] if values else "0"
        for d, value in enumerate(values[1:], start=1):
            text = f"({text}) * {name}_n{d} + {value}"
        return text

    def _surely_nonnegative(self, index: ast.expr) -> bool:
        offset = offset_of(index)
        if offset is None:
            return False
        if offset.var is None:
            return offset.offset >= 0
        loop = next((n for n in self.loops.values() if n.target.id == offset.var), None)
        if loop is None:
            return False
        start, stop, step = range_args(loop)
        if step > 0:
            return start is None and offset.offset >= 0 or (
                isinstance(start, ast.Constant) and isinstance(start.value, int)
                and start.value + offset.offset >= 0)
        return isinstance(stop, ast.Constant) and isinstance(stop.value, int) \
            and stop.value + 1 + offset.offset >= 0

    # -- scalar replacement ----------------------------------------------------------------
    def _promote(self, node: ast.For, copies: list[_Copy], depth: int, guarded: bool,
                 runs: str) -> tuple[list[tuple[str, ast.Subscript]], list[_Copy]]:
        """The loop's ``promotable`` elements (but arrays updated atomically, staged, or
        already in a register): loaded into a register before the loop, stored after it
        (``_store``), both only where the loop runs at all (``runs``). Returns them and the
        copies that read the registers."""
        if self.mapping.block_splits and not self._is_split(node):
            return [], copies  # thread 0 alone writes the nest's arrays outside split loops
        reduced = {name for name, _ in self._split_reductions(node) or ()}
        candidates = promotable(node, self.redirected, apart=bool(self.mapping.block_splits))
        found = [(name, sub) for name, sub in candidates.items()
                 if (not self.mapping.block_splits or name in reduced)
                 and name not in self.mapping.atomics
                 and all(s.array != name for s in self.staged.values())
                 and not any(c.registers.get(name) for c in copies)]
        if not found:
            return [], copies
        for name, sub in found:  # other subscripts of the array stay reads of memory
            self.in_register[name] = [ast.unparse(i) for i in subscript_parts(sub)[1]]
        pad = "  " * depth
        promoted = []
        for copy_ in copies:
            registers = dict(copy_.registers)
            for name, sub in found:
                register = f"r_{name}_{'_'.join(map(str, copy_.index)) or '0'}"
                while register in self.registers:  # a sibling loop's, in the same scope
                    register += "_"
                self.registers.add(register)
                text = self.translator(copy_).expr(sub)
                test = f"{copy_.ok} && {runs}" if guarded else runs
                load = f"({test}) ? {text} : 0"
                self.lines.append(f"{pad}{c_type(self.typing.arrays[name])} {register} = "
                                  f"{load};")
                registers[name] = register
            promoted.append(_Copy(copy_.index, copy_.rename, copy_.ok, registers))
        var = node.target.id  # type: ignore[attr-defined]
        self.promoted += [text for text in (f"{ast.unparse(sub)} in a register across the "
                                            f"{var} loop" for _, sub in found)
                          if text not in self.promoted]
        return found, promoted

    def _store(self, found: list[tuple[str, ast.Subscript]], before: list[_Copy],
               after: list[_Copy], depth: int, guarded: bool, runs: str,
               lead: str = "") -> None:
        """The promoted elements written back once, after their loop (by the ``lead``
        thread alone, where threads share the loop and each holds the whole)."""
        if not found:
            return
        pad = "  " * depth
        for old, new in zip(before, after):
            for name, sub in found:
                text = self.translator(old).expr(sub)
                test = " && ".join(t for t in (old.ok if guarded else "", runs, lead) if t)
                self.lines.append(f"{pad}if ({test}) {text} = {new.registers[name]};")


def _accumulator(copy_: _Copy, found: Product) -> str | None:
    """The register ``copy_`` accumulates ``found`` in: its name for the scalar, or the
    register its element was loaded into (None: not loaded)."""
    if found.scalar:
        return copy_.rename.get(found.name)
    return copy_.registers.get(found.name)


def _tile_at(name: str, places: Sequence[str]) -> str:
    """C text: the element of shared array ``name`` at ``places``, one per dimension."""
    return name + "".join(f"[{place}]" for place in places)


def _read_along(stage: _Stage) -> bool:
    """Whether ``stage`` is a tile read strip by strip along a loop (what a ring holds)."""
    return bool(stage.along) and not stage.writes


def _for_header(var: str, low: str, high: str, step: int) -> str:
    """``for (...) {`` of a loop the thread runs as written."""
    return (f"for ({var} = {low}; {var} {'<' if step > 0 else '>'} {high}; {var} += "
            f"{step}) {{")


def _redirected(body: Sequence[ast.stmt], mapping: NestMapping) -> dict[int, str]:
    """The reads the mapping's copies serve: the copy's name by id of the subscript."""
    found: dict[int, str] = {}
    for node in reads(body):
        name = subscript_parts(node)[0]
        for copied in mapping.copies:
            if copied.array == name and copied.serves(node):
                found[id(node)] = copied.name
    return found


def _shape_arrays(body: Sequence[ast.stmt], mapping: NestMapping) -> set[str]:
    from loclab.transform.cuda_syntax import shape_of

    out = set()
    for node in walk(list(body) + [mapping.node]):
        found = shape_of(node) if isinstance(node, ast.expr) else None
        if found is not None:
            out.add(found[0])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "len" and node.args and isinstance(node.args[0], ast.Name):
            out.add(node.args[0].id)
    return out


def _local_types(body: Sequence[ast.stmt], typing: Typing, locals_: set[str]) -> dict:
    """The join of every type assigned to each local scalar, to a fixed point."""
    types: dict = {}
    for _ in range(len(locals_) + 2):
        typing.scalars.update(types)
        translator = Translator(typing, lambda n, i, t: "", lambda n: "")
        changed = False
        for node in walk(body):
            pairs = []
            if isinstance(node, ast.Assign):
                pairs = [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                pairs = [(node.target.id, node.value)]
            for name, value in pairs:
                found = join(types.get(name), translator.type_of(value))
                # (not ``found != types.get(name)``: NumPy reads None as float64)
                if found is not None and (name not in types or found != types[name]):
                    types[name] = found
                    changed = True
        if not changed:
            break
    return types


def _interval(node: ast.expr | None, box: dict[str, tuple[str, str]],
              where: Callable[[ast.AST], str]) -> tuple[str, str]:
    """Python text of the smallest and largest values of a bound over the box of the grid
    loops outside it (affine in them; sizes are known at launch)."""
    from loclab.errors import UsageError

    if node is None:
        return "0", "0"
    names = names_in([node]) & set(box)
    if not names:
        text = ast.unparse(node)
        return text, text
    if isinstance(node, ast.Name):
        return box[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        low_l, high_l = _interval(node.left, box, where)
        low_r, high_r = _interval(node.right, box, where)
        if isinstance(node.op, ast.Add):
            return f"({low_l} + {low_r})", f"({high_l} + {high_r})"
        return f"({low_l} - ({high_r}))", f"({high_l} - ({low_r}))"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for const, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(const, ast.Constant) and isinstance(const.value, int):
                low, high = _interval(other, box, where)
                c = const.value
                return (f"{c} * ({low})", f"{c} * ({high})") if c >= 0 else (
                    f"{c} * ({high})", f"{c} * ({low})")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in {"min", "max"}:
        parts = [_interval(a, box, where) for a in node.args]
        fn = node.func.id
        return (f"{fn}({', '.join(p[0] for p in parts)})",
                f"{fn}({', '.join(p[1] for p in parts)})")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        low, high = _interval(node.operand, box, where)
        return f"-({high})", f"-({low})"
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.FloorDiv)) \
            and isinstance(node.right, ast.Constant) and isinstance(node.right.value, int) \
            and not isinstance(node.right.value, bool) and node.right.value > 0:
        c = node.right.value  # (Python's: a remainder in [0, c), a floor monotone)
        if isinstance(node.op, ast.Mod):
            return "0", f"{c - 1}"
        low, high = _interval(node.left, box, where)
        return f"(({low}) // {c})", f"(({high}) // {c})"
    raise UsageError(f"{where(node)}: the CUDA emitter cannot bound {ast.unparse(node)} over "
                     "the threads (not affine in the loops outside it)")
