"""``loclab transform --emit cuda``: the grid and block steps, judged like their siblings, and the
kernels they give, compiled by nvcc here and run against the original on a GPU.

The steps are checked by brute force on generated nests (:mod:`tests.nestgen`): a mapping
the checker accepts must replay to the original's value flow with no two iterations of a
mapped loop touching one location (the loops of a grid and its block all run at once); a
refused one must name a dependence the oracle finds carried by the loop it names.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loclab
from loclab.cli import main
from loclab.errors import UsageError
from loclab.transform import transform
from loclab.transform.steps import IllegalStep
from loclab.transform.storage import StorageError
from tests.nestgen import nests
from tests.test_transform import TRANSPOSE
from tests.test_transform_oracle import SIZES, check_carried
from tests.transform_replay import judge

PRODUCT = '''
def product(A, B, C, M, N, K):
    for i in range(M):
        for j in range(N):
            acc = 0.0
            for k in range(K):
                acc += A[i, k] * B[k, j]
            C[i, j] = acc
'''

HISTOGRAM = '''
def histogram(inds, vals, hist, n):
    for i in range(n):
        hist[inds[i]] += vals[i]
'''

STENCIL = '''
def stencil(A, B, T, N):
    for t in range(T):
        for i in range(1, N - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, N - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
'''

PREFIX = '''
def prefix(A, N):
    for i in range(1, N):
        A[i] = A[i] + A[i - 1]
'''

TRIANGLE = '''
def triangle(A, B, N):
    for i in range(N):
        for j in range(i, N):
            B[i, j] = A[j, i] * 2.0
'''

ACCUMULATE = '''
def accumulate(A, B, C, M, N, K):
    for i in range(M):
        for j in range(N):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j]
'''

ROW_SUMS = '''
def row_sums(A, s, N, M):
    for i in range(N):
        t = 0.0
        for j in range(M):
            t += A[i, j]
        s[i] = t
'''

# The lectures' product: 32 x 32 tiles of C a block, 2 x 2 of them in a thread's registers
# (unroll-and-jam of a loop inside a tile of 2: no remainder), slices of A and B staged
# (scripts/transform-cuda-bench times 4 x 4 of 64 x 64, which takes isl longer to write).
SCALED = '''
def scaled(A, B, alpha, N):
    for i in range(N):
        B[i] = alpha * A[i] + B[i] / alpha
'''

# sizes named as the module's own index type and variable are: they keep their names
NAMED_LIKE_THE_MODULE = '''
def scale_rows(A, B, I, index):
    for i in range(I):
        for j in range(index):
            B[i, j] = 2.0 * A[i, j]
'''

REGISTER_TILED = ("privatize(acc); tile(i=32, j=32); stripmine(i, 2, it); stripmine(j, 2, jt); "
                  "permute(ii, jj, it, jt, i, j); stripmine(k, 16, kk); "
                  "unroll(j, 2, jam=True); unroll(i, 2, jam=True); stage(A, kk); stage(B, kk); "
                  "grid(ii, jj); block(it=16, jt=16)")
STAGED_TRANSPOSITION = ("tile(i=32, j=32); interchange(i, j); stage(A, jj); grid(ii, jj); "
                        "block(j=8, i=32)")

# (source, recipe, sizes for --verify): each kind of mapping the emitter writes
RECIPES = [
    (TRANSPOSE, "tile(i=32, j=32); grid(ii, jj); block(i=8, j=32)", {"N": 70, "M": 45}),
    (PRODUCT, "privatize(acc); tile(i=16, j=16); grid(ii, jj); block(i=16, j=16)",
     {"M": 40, "N": 33, "K": 21}),
    (TRANSPOSE, STAGED_TRANSPOSITION, {"N": 70, "M": 45}),
    (ACCUMULATE, "tile(i=16, j=16, k=8); stage(A, kk); stage(B, kk); grid(ii, jj); "
                 "block(i=16, j=16)", {"M": 40, "N": 33, "K": 21}),
    (PRODUCT, REGISTER_TILED, {"M": 70, "N": 45, "K": 37}),
    (PRODUCT, REGISTER_TILED.replace("stage(A, kk)", "stage(A, kk, transpose=True)"),
     {"M": 70, "N": 45, "K": 37}),
    (HISTOGRAM, "stripmine(i, 128); grid(ii); block(i=128)", {"n": 1000}),
    (SCALED, "stripmine(i, 128); grid(ii); block(i=128)", {"N": 300}),  # a float argument
    (STENCIL, "stripmine(i@4, 64); stripmine(i@6, 64); grid(ii@4); block(i@4=64); "
              "grid(iii@6); block(i@6=64)", {"T": 5, "N": 300}),
    (PREFIX, "", {"N": 100}),
    (TRIANGLE, "grid(i, j)", {"N": 37}),
    (ROW_SUMS, "privatize(t); grid(i)", {"N": 50, "M": 31}),
    (NAMED_LIKE_THE_MODULE, "grid(i, j)", {"I": 37, "index": 20}),
]


def emitted(source: str, recipe: str, **options):
    """The function as CUDA with the recipe (none: as written, in one thread)."""
    if options:
        return transform(source, recipe or [], emit="cuda", **options)
    return _emitted(source, recipe)


@functools.cache
def _emitted(source: str, recipe: str):
    return transform(source, recipe or [], emit="cuda")


def kernels_of(source: str) -> str:
    return re.search(r"SOURCE = r'''(.*?)'''", source, re.S).group(1)


# -- the steps --------------------------------------------------------------------------------
def test_the_lectures_mapping_puts_the_last_loop_on_x_and_strides_over_any_trip_count():
    result = transform(TRANSPOSE, "tile(i=32, j=32); grid(ii, jj); block(i=8, j=32)",
                       emit="cuda")
    assert [s.reason.split(":")[0] for s in result.steps[1:]] == [
        "ii on blockIdx.y, jj on blockIdx.x",
        "i on threadIdx.y (8 threads), j on threadIdx.x (32 threads)"]
    kernel = kernels_of(result.source)
    # 32 iterations over 8 threads: 4 a thread, unrolled, the edge of the sizes a guard
    assert "const I i = ii + (I)threadIdx.y + i_r * 8;" in kernel and "if (i < N) {" in kernel
    assert "const I j = jj + (I)threadIdx.x;  // one iteration a thread" in kernel
    assert "(32, 8, 1)" in result.source  # threads along x, y, z
    untiled = kernels_of(transform(TRANSPOSE, "grid(i); block(j=32)", emit="cuda").source)
    assert "for (I j = (I)threadIdx.x; j < M; j += (I)32) {" in untiled  # any trip count


@pytest.mark.parametrize("recipe, message", [
    ("grid(i)", "is illegal: i carries D1"),
    ("stripmine(i, 8); grid(ii); block(i=8)", "is illegal: ii carries D1"),
])
def test_a_loop_with_a_dependence_is_refused_with_the_dependence(recipe, message):
    with pytest.raises(IllegalStep, match=re.escape(message)):
        transform(PREFIX, recipe, emit="cuda")


@pytest.mark.parametrize("source, recipe, message", [
    (TRANSPOSE, "grid(i)", "grid and block map loops onto a GPU: emit cuda"),
    (TRANSPOSE, "block(i=32)", "i is not inside a grid: map the loops around it"),
    (PRODUCT, "privatize(acc); grid(i); block(k=32)",
     "k must be the only thing inside j: code beside it would run once per thread"),
    (TRANSPOSE, "grid(j, i)", "name the loops of the band in order"),
    (TRANSPOSE, "grid(i); grid(j)", "i is already mapped (blockIdx.x)"),
    (TRANSPOSE, "grid(i); block(j=2000)", "bad thread count 2000"),
    (TRANSPOSE, "tile(i=32, j=32); grid(ii, jj); block(i=64, j=32)",
     "2048 threads: a block has at most 1024"),
    (TRANSPOSE, "grid(i); tile(j=4)", "after grid(i) only grid and block steps may follow"),
    (TRANSPOSE, "grid(i, j=4)", "takes loops only"),
    ("def total(A, N):\n    s = 0.0\n    for i in range(N):\n        s += A[i]\n    return s\n",
     "grid(i)", "combines s (+) across its iterations"),
])
def test_a_mapping_cuda_cannot_run_is_one_clear_error(source, recipe, message):
    emit = None if message.endswith("emit cuda") else "cuda"
    with pytest.raises((UsageError, IllegalStep), match=re.escape(message)):
        transform(source, recipe, emit=emit)


def test_a_staged_slice_goes_to_shared_memory_between_barriers_its_rows_padded():
    result = emitted(TRANSPOSE, "tile(i=32, j=32); interchange(i, j); stage(A, jj); "
                                "grid(ii, jj); block(j=8, i=32)")
    kernel = kernels_of(result.source)
    assert "__shared__ __align__(16) float A_jj[32 * 33];" in kernel  # 32 floats span the banks: pad
    copy, compute = kernel.split("const I A_jj_lo0")[1].split("for (int j_r")
    assert copy.count("__syncthreads();") == 1 and "A_jj[(A_jj_o0) * 33 + A_jj_o1] = A[" in copy
    assert "B[(j) * B_n1 + i] = (float)(A_jj[((i - A_jj_lo0)) * 33 + (j - A_jj_lo1)]);" in \
        compute
    # a whole slice of 16-byte rows is read 16 bytes a thread, any other element by element
    vector, scalar = copy.split("} else {")
    assert "A_jj_w0 == 32 && A_jj_w1 == 32 && A_jj_lo1 % 4 == 0" in vector and \
        "A_n1 % 4 == 0" in vector and "float4 A_jj_v = *reinterpret_cast<const float4*>(" in vector
    assert "A_jj[(A_jj_o0) * 33 + A_jj_o1v + 3] = A_jj_v.w;" in vector
    assert "if (A_jj_o0 < A_jj_w0 && A_jj_o1 < A_jj_w1) A_jj[" in scalar
    unpadded = kernels_of(emitted(TRANSPOSE, "tile(i=32, j=32); stage(A, jj); grid(ii, jj); "
                                             "block(i=8, j=32)").source)  # read along rows
    assert "*reinterpret_cast<float4*>(&A_jj[(A_jj_o0) * 32 + A_jj_o1v]) = A_jj_v;" in unpadded
    few = kernels_of(emitted(TRANSPOSE, "tile(i=16, j=16); stage(A, jj); grid(ii, jj); "
                                        "block(i=16, j=16)").source)
    assert "A_jj_v" not in few  # 16 x 16 floats: 64 vectors, fewer than the 256 threads


def test_a_loop_that_stages_first_thing_double_buffers_its_slices():
    """The next iteration's slices are copied in the background (cp.async) into one buffer
    while this iteration reads the other: one barrier an iteration, after its copies
    arrived; the first iteration's copies before the loop, behind a barrier (a tile
    before may still be reading)."""
    kernel = kernels_of(emitted(ACCUMULATE, "tile(i=64, j=16, k=16); stage(A, kk); "
                                            "stage(B, kk); grid(ii, jj); block(i=16, j=16)"
                                ).source)
    assert "__shared__ __align__(16) float A_kk[64 * 16 * 2];" in kernel
    before, loop = kernel.split("for (I kk = 0; kk < K; kk += 16) {")
    assert before.rstrip().endswith("loclab_copies_sent();\n      }")
    assert "__syncthreads();\n      int kk_slot = 0;" in before and "const I kk = 0;" in before
    assert loop.count("__syncthreads();") == 1
    assert "loclab_copies_arrived();\n        __syncthreads();" in loop
    assert "if (kk + 16 < K) {" in loop and "const I kk = kk_next;" in loop
    # 64 x 16 floats: a 16-byte copy for each thread, into the other buffer
    assert "loclab_copy_async<16>(&A_kk[(1 - kk_slot) * 1024 + (A_kk_o0) * 16 + A_kk_o1v], " \
        "&A[" in loop
    assert "loclab_copy_async<4>(&B_kk[(1 - kk_slot) * 256 + (B_kk_o0) * 16 + B_kk_o1], " in loop
    assert "A_kk[kk_slot * 1024 + " in loop and "kk_slot = 1 - kk_slot;" in loop
    doubles = kernels_of(emitted(TRANSPOSE, STAGED_TRANSPOSITION, dtypes={"A": "float64",
                                                                          "B": "float64"}
                                 ).source)
    assert "double2 A_jj_v" in doubles and "A_jj_lo1 % 2 == 0" in doubles
    narrow = kernels_of(emitted(TRANSPOSE, "tile(i=32, j=6); interchange(i, j); stage(A, jj); "
                                           "grid(ii, jj); block(j=6, i=32)").source)
    assert "reinterpret_cast" not in narrow  # rows of 6 floats: not whole 16-byte groups
    product = kernels_of(emitted(ACCUMULATE, "tile(i=16, j=16, k=16); stage(A, kk); "
                                             "stage(B, kk); grid(ii, jj); block(i=16, j=16)"
                                 ).source)
    assert "__shared__ __align__(16) float A_kk[16 * 16 * 2];" in product  # no pad


@pytest.mark.parametrize("recipe, message", [
    ("stage(A, i); grid(i); block(j=32)", "stage(A, i): the slice is not bounded by a "
                                          "constant"),
    ("tile(i=32, j=32); stage(A, j); grid(ii, jj); block(i=8, j=32)",
     "stage(A, j): j runs in each thread, inside i, which has more iterations than threads"),
    ("copy(A, i); grid(i)", "copy(A, i): not emitted for CUDA"),
])
def test_a_slice_shared_memory_cannot_hold_is_refused(recipe, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        emitted(TRANSPOSE, recipe)


def test_a_register_tile_keeps_each_threads_block_in_scalars_and_stages_the_blocks_slices():
    kernel = kernels_of(emitted(PRODUCT, REGISTER_TILED).source)
    # the block's slice, not a thread's; padded: a warp's two rows of threads read rows 2
    # apart, 32 elements apart unpadded: one bank
    assert "__shared__ __align__(16) float A_kk[32 * 17 * 2];" in kernel
    assert "__shared__ __align__(16) float B_kk[16 * 32 * 2];" in kernel  # rows: no padding
    assert "float acc_1_1;" in kernel and "acc_0_0 = (float)((acc_0_0 + (A_kk[" in kernel
    assert "const bool it_on = it < (loclab_min(M, ii + 32));" in kernel
    assert "if (it_on && jt_on) {" in kernel  # the statements where the iteration exists


def test_a_transposed_slice_is_read_along_rows_and_copied_column_by_column():
    kernel = kernels_of(emitted(PRODUCT, REGISTER_TILED.replace(
        "stage(A, kk)", "stage(A, kk, transpose=True)")).source)
    assert "__shared__ __align__(16) float A_kk[16 * 32 * 2];" in kernel  # k by i
    assert "&A_kk[(0) * 512 + (A_kk_o1) * 32 + A_kk_o0], &A[" in kernel  # along A's rows
    assert "A_kk[kk_slot * 512 + ((k - A_kk_lo1)) * 32 + ((it + 1) - A_kk_lo0)]" in kernel


def test_a_whole_tile_runs_its_innermost_loop_unrolled_and_without_guards():
    kernel = kernels_of(emitted(PRODUCT, REGISTER_TILED).source)
    fast, slow = kernel.split("// a whole tile\n")[1].split("} else {", 1)
    assert "if (it_on && jt_on && M >= it + 2 && N >= jt + 2 && kk + 16 <= K) {  " in kernel
    assert fast.lstrip().startswith("#pragma unroll\n") and "if (" not in fast
    assert "for (I k = kk; k < kk + 16; ++k) {" in fast
    assert "for (I k = kk; k < loclab_min(K, kk + 16); ++k) {" in slow and "if (" in slow


def test_only_innermost_loops_are_emitted_twice():
    """A loop over a tile that holds another is emitted once (two versions per level of a
    nest would grow the code with its depth, and unroll whole tiles of loops)."""
    kernel = kernels_of(emitted(TRANSPOSE, "tile(i=32, j=32); grid(ii)").source)
    assert kernel.count("// a whole tile") == 1
    assert "for (I i = ii; i < loclab_min(N, ii + 32); ++i) {" in kernel
    assert "for (I j = jj; j < jj + 32; ++j) {" in kernel


def test_block_loops_over_a_tile_take_a_constant_number_of_iterations_a_thread():
    kernel = kernels_of(emitted(TRANSPOSE, STAGED_TRANSPOSITION).source)
    assert "for (int j_r = 0; j_r < 4; ++j_r) {" in kernel
    assert "const I j = jj + (I)threadIdx.y + j_r * 8;" in kernel and "if (j < M) {" in kernel
    assert "(threadIdx.x + 32 * (threadIdx.y + 8 * threadIdx.z))" in kernel  # constants


def test_element_types_are_checked_and_said():
    result = transform(HISTOGRAM, "grid(i)", emit="cuda")
    assert "'inds': ('int64', 1)" in result.source and "'vals': ('float32', 1)" in result.source
    wide = transform(HISTOGRAM, "grid(i)", emit="cuda", dtypes={"vals": "float64",
                                                                 "hist": "float64"})
    assert "loclab_atomic_add(&hist[" in kernels_of(wide.source)
    with pytest.raises(UsageError, match="--dtype C: not an array argument"):
        transform(HISTOGRAM, "grid(i)", emit="cuda", dtypes={"C": "float32"})
    with pytest.raises(UsageError, match="not a NumPy type"):
        transform(HISTOGRAM, "grid(i)", emit="cuda", dtypes={"vals": "floaty"})


def test_a_scalar_a_kernel_assigns_and_later_code_reads_is_refused_with_its_line():
    source = '''
def f(A, B, N):
    s = 0.0
    for i in range(N):
        s = s + A[i]
    for i in range(N):
        B[i] = s
'''
    with pytest.raises(UsageError, match=r"s is assigned in the kernel of line 5 and read"):
        emitted(source, "")


def test_the_command_line_writes_the_module_and_says_what_verify_needs(tmp_path, capsys):
    path = tmp_path / "transpose.py"
    path.write_text(TRANSPOSE)
    out = tmp_path / "transpose_cuda.py"
    recipe = "tile(i=32, j=32); grid(ii, jj); block(i=8, j=32)"
    assert main(["transform", f"{path}::transpose", "--apply", recipe, "--emit", "cuda",
                 "--dtype", "A=float64", "--dtype", "B=float64", "-o", str(out)]) == 0
    assert "ARRAYS = {'A': ('float64', 2), 'B': ('float64', 2)}" in out.read_text()
    assert main(["transform", str(path), "--apply", "grid(i)", "--dtype", "A=float64"]) == 2
    assert "--dtype gives the element types of --emit cuda" in capsys.readouterr().err


# -- the oracle -------------------------------------------------------------------------------
@st.composite
def mappings(draw, source: str) -> str:
    """A grid over one or two loops of a band, maybe a block inside it, maybe strip-mined
    first (the lectures' tile loops over blocks, the loops in a tile over threads)."""
    nest = loclab.analyze(source).nest
    chains = []
    for top in (loop for loop in nest.loops if loop.depth == 0):
        chain = [top]
        while len(chain[-1].body) == 1 and hasattr(chain[-1].body[0], "var"):
            chain.append(chain[-1].body[0])
        chains.append(chain)
    chain = draw(st.sampled_from(chains))
    names = [f"{loop.var}@{loop.line}" for loop in chain]
    kind = draw(st.sampled_from(("grid", "grid2", "block", "deep", "strip", "stage")))
    threads = draw(st.sampled_from((2, 3, 32)))
    if kind == "grid2" and len(names) >= 2:
        return f"grid({names[0]}, {names[1]})"
    if kind == "block" and len(names) >= 2:
        return f"grid({names[0]}); block({names[1]}={threads})"
    if kind == "deep" and len(names) >= 3:  # a loop between the grid and the block
        return f"grid({names[0]}); block({names[2]}={threads})"
    if kind in ("strip", "stage"):
        size = draw(st.integers(1, 4))
        loop = chain[0]
        tile = f"{loop.var * 2}@{loop.line}"
        read = sorted({a.variable.name for s in nest.statements for a in s.accesses
                       if chain[0] in s.loops and a.variable.is_array and not a.write})
        staged = (f"stage({draw(st.sampled_from(read))}, {tile}); "
                  if kind == "stage" and read else "")
        return (f"stripmine({names[0]}, {size}); {staged}grid({tile}); "
                f"block({names[0]}={size})")
    return f"grid({names[0]})"


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_accepted_mappings_run_no_two_conflicting_iterations_at_once(data):
    source = data.draw(nests())
    recipe = data.draw(mappings(source))
    try:
        result = transform(source, recipe, emit="cuda")
    except (UsageError, StorageError):
        return  # not a band to map here (an imperfect nest, a name taken), or not emitted
    except IllegalStep as refusal:
        if refusal.carried is not None:
            check_carried(source, recipe, refusal)
        return
    for sizes in SIZES:
        verdict = judge(source, result.program, sizes)
        assert verdict, (f"{recipe} accepted but wrong at {sizes}:\n{source}\n"
                         + "\n".join(verdict.problems))


# -- nvcc here, the GPU there -----------------------------------------------------------------
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
@pytest.mark.parametrize("source, recipe, sizes", RECIPES, ids=lambda v: str(v)[:30])
def test_every_emitted_kernel_compiles_with_nvcc_without_spilling(source, recipe, sizes,
                                                                  tmp_path: Path):
    result = emitted(source, recipe)
    path = tmp_path / "kernels.cu"
    kernels = re.search(r"KERNELS = (\[.*\])", result.source).group(1)
    instances = ", ".join(f"(void*)&{name}<{index}>" for name in eval(kernels)  # noqa: S307
                          for index in ("int", "long long"))
    path.write_text(kernels_of(result.source)  # both index types, as CuPy instantiates them
                    + f"\nvoid* loclab_instances[] = {{{instances}}};\n")
    done = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++14", "-c", "-o", "/dev/null",
                           "--resource-usage", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert " 0 bytes spill stores" in done.stderr + done.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("source, recipe, sizes", RECIPES, ids=lambda v: str(v)[:30])
def test_every_emitted_function_computes_what_the_original_does_on_the_gpu(source, recipe,
                                                                           sizes):
    result = emitted(source, recipe)
    verification = result.verify(**sizes)
    assert verification.ok, str(verification)


@pytest.mark.gpu
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_nests_mapped_on_the_gpu_compute_what_the_original_does(data):
    source = data.draw(nests())
    recipe = data.draw(mappings(source))
    try:
        result = transform(source, recipe, emit="cuda")
    except (UsageError, StorageError, IllegalStep):
        return
    sizes = {name: size for name, size in (("N", 9), ("M", 7))
             if name in result.program.nest.parameters}
    try:
        verification = result.verify(**sizes)
    except UsageError:
        return  # the original fails on its inputs (a subscript below 0, a scalar never set)
    assert verification.ok, f"{recipe}\n{source}\n{verification}"
