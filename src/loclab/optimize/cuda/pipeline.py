"""Staged strips copied in the background: a ring of tiles in shared memory filled by
``cp.async`` a few strips ahead of the one computed.

Why: a staged loop's tiles were loaded a strip ahead into registers and stored into shared
memory at the top of each strip, between two barriers. Those registers stay live across the
whole strip's computation (a matrix product's 8 x 8 register tile spent 193 registers, one
block an SM), and each strip's two barriers stall a block that has no other block beside
it. ``cp.async`` copies global memory into shared memory without registers and without
blocking the thread; with ``depth`` tiles in a ring, ``depth - 1`` strips are in flight
while one is computed, and one barrier a strip suffices: a strip's buffer is filled again
only after every thread has passed the barrier of a later strip, so after it finished
computing from it. Measured on an H200 (each module beside itself with the ring off, one
call): mmm's auto kernel at 4096^3 1.07x (52.6% -> 56.5% of cuBLAS), PolyBench's two_mm
1.12x, three_mm and correlation 1.10x, gemm 1.06x.

Elements outside the array are zero-filled by the copy itself (a source size of 0), as the
register path's ``? x : 0`` did. Before sm_80 the copies are plain loads and stores, done
when the thread passes them; the barriers order them the same way.
"""

from __future__ import annotations

from loclab.transform.cuda_staging import ASYNC_HELPERS

DEPTHS = (3, 2)  # tiles in a ring, the deepest that fits shared memory first
COPY_BYTES = (4, 8)  # the element sizes cp.async copies one at a time
PIPELINE_HELPERS = ASYNC_HELPERS + """
// One element copied in the background, or zeros where it is outside its array (``inside``
// false: nothing is read); waiting until at most PENDING groups are in flight.
template <int BYTES> __device__ __forceinline__ void loclab_copy_or_zero(void* to,
    const void* from, bool inside) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\\n" ::
               "r"((unsigned)__cvta_generic_to_shared(to)), "l"(from), "n"(BYTES),
               "r"(inside ? BYTES : 0));
#else
  struct Bytes { char b[BYTES]; };
  if (inside) *(Bytes*)to = *(const Bytes*)from; else *(Bytes*)to = Bytes{};
#endif
}
// Four 4-byte elements copied in the background as one 16-byte group: both addresses
// 16-byte aligned, the whole group inside its array (``group_copy_line``).
__device__ __forceinline__ void loclab_copy_group(void* to, const void* from) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" ::
               "r"((unsigned)__cvta_generic_to_shared(to)), "l"(from));
#else
  *(int4*)to = *(const int4*)from;
#endif
}
__device__ __forceinline__ bool loclab_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0; }
template <int PENDING> __device__ __forceinline__ void loclab_copies_pending() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\\n" :: "n"(PENDING));
#endif
}
"""


def ring_depth(tile_bytes: list[int], other_bytes: int, limit: int) -> int:
    """Tiles in the ring of a kernel whose ringed tiles take ``tile_bytes`` each and whose
    other tiles ``other_bytes``: the deepest of ``DEPTHS`` within ``limit``, or 0 (the
    registers' path) where not even two fit."""
    return next((depth for depth in DEPTHS
                 if depth * sum(tile_bytes) + other_bytes <= limit), 0)


def copy_line(target: str, guard: str, array: str, source: str, itemsize: int) -> str:
    """One element's copy into the ring (C text): ``target`` from ``source`` (an element of
    ``array``) where ``guard`` holds, zeros elsewhere; the source's address is formed only
    where it holds."""
    return (f"{{ const bool inside = {guard}; loclab_copy_or_zero<{itemsize}>(&{target}, "
            f"inside ? &{source} : {array}, inside); }}")


def group_copy_line(target: str, whole: str, source: str, elements: list[str]) -> str:
    """A group of 4 elements' copy into the ring (C text): 16 bytes at once where ``whole``
    holds (every element inside the array, both addresses aligned), else ``elements``, the
    group's copies one element each."""
    return f"if ({whole}) loclab_copy_group(&{target}, &{source}); else {{ " \
        + " ".join(elements) + " }"


def ring_slot(buffer: str, target: str) -> str:
    """``target`` (a tile's name and subscripts) in the ring's slot ``buffer``."""
    name, bracket, rest = target.partition("[")
    return f"{name}[{buffer}]{bracket}{rest}"
