// Asynchronous copies from global to shared memory (cp.async, sm_80 and later), shared by the
// kernels that stage tiles without passing them through registers: every copy of a tile is in
// flight at once (no registers wait for them), and a block multiplies one stage while the next
// arrives. Below sm_80 each copy is a plain load and store: the same results, no overlap. A
// case's kernels.cu includes it by a relative quoted path (see gpu/block_scan.cuh).
#ifndef LOCLAB_ASYNC_COPY_CUH
#define LOCLAB_ASYNC_COPY_CUH

namespace loclab {

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// BYTES (4 or 16; 16 needs both addresses 16-byte aligned) from `src` to the shared-memory
// address `to`, zeros where !valid (src-size 0 reads nothing, but src must still be a valid
// address). 16-byte copies go through L2 only (.cg: a staged tile is read once per block);
// 4-byte ones can only go through L1 (.ca).
template <int BYTES>
__device__ __forceinline__ void copy_async(unsigned to, const void* src, bool valid = true) {
    static_assert(BYTES == 4 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes; we use 4 or 16");
#if __CUDA_ARCH__ >= 800
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                     :: "r"(to), "l"(src), "r"(valid ? 16 : 0) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                     :: "r"(to), "l"(src), "r"(valid ? 4 : 0) : "memory");
#else
    void* dst = __cvta_shared_to_generic(to);
    if constexpr (BYTES == 16)
        *static_cast<float4*>(dst) = valid ? *static_cast<const float4*>(src)
                                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    else
        *static_cast<float*>(dst) = valid ? *static_cast<const float*>(src) : 0.0f;
#endif
}

template <int BYTES>
__device__ __forceinline__ void copy_async(void* dst, const void* src, bool valid = true) {
    copy_async<BYTES>(shared_address(dst), src, valid);
}

// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void commit_copies() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most PENDING of this thread's committed groups are still in flight (a barrier
// after it publishes the copies to the block).
template <int PENDING>
__device__ __forceinline__ void wait_copies() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
#endif
}

}  // namespace loclab

#endif  // LOCLAB_ASYNC_COPY_CUH
