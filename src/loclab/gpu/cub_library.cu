// CUB's device-wide algorithms behind a C interface, for the library rows of the scan-family
// cases. They are host code that launches CUB's own kernels, so nvcc builds this file into a
// shared library (loclab.gpu.cub) rather than NVRTC. Every function follows CUB's two-phase
// protocol: called with temp == nullptr it only writes the temporary storage it needs to
// *temp_bytes; called again with that storage it enqueues the work on `stream`. Returns the
// cudaError_t of the call (0: success).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/std/functional>

#define LOCLAB_EXPORT extern "C" __attribute__((visibility("default")))

LOCLAB_EXPORT int loclab_cub_inclusive_sum_float(void* temp, size_t* temp_bytes, const float* in,
                                                 float* out, long long n, cudaStream_t stream) {
    return cub::DeviceScan::InclusiveSum(temp, *temp_bytes, in, out, n, stream);
}

LOCLAB_EXPORT int loclab_cub_exclusive_sum_float(void* temp, size_t* temp_bytes, const float* in,
                                                 float* out, long long n, cudaStream_t stream) {
    return cub::DeviceScan::ExclusiveSum(temp, *temp_bytes, in, out, n, stream);
}

LOCLAB_EXPORT int loclab_cub_inclusive_sum_int(void* temp, size_t* temp_bytes, const int* in,
                                               int* out, long long n, cudaStream_t stream) {
    return cub::DeviceScan::InclusiveSum(temp, *temp_bytes, in, out, n, stream);
}

LOCLAB_EXPORT int loclab_cub_exclusive_sum_int(void* temp, size_t* temp_bytes, const int* in,
                                               int* out, long long n, cudaStream_t stream) {
    return cub::DeviceScan::ExclusiveSum(temp, *temp_bytes, in, out, n, stream);
}

// Segmented scan: an inclusive sum that restarts wherever the key (a segment id) changes.
LOCLAB_EXPORT int loclab_cub_inclusive_sum_by_key_float(void* temp, size_t* temp_bytes,
                                                        const int* keys, const float* in,
                                                        float* out, long long n,
                                                        cudaStream_t stream) {
    return cub::DeviceScan::InclusiveSumByKey(temp, *temp_bytes, keys, in, out, n,
                                              cuda::std::equal_to<>{}, stream);
}

// Stream compaction: the elements whose flag is nonzero, in order; their count to *selected.
LOCLAB_EXPORT int loclab_cub_select_flagged_float(void* temp, size_t* temp_bytes, const float* in,
                                                  const unsigned char* flags, float* out,
                                                  long long* selected, long long n,
                                                  cudaStream_t stream) {
    return cub::DeviceSelect::Flagged(temp, *temp_bytes, in, flags, out, selected, n, stream);
}

LOCLAB_EXPORT int loclab_cub_sort_keys_uint(void* temp, size_t* temp_bytes, const unsigned* in,
                                            unsigned* out, long long n, cudaStream_t stream) {
    return cub::DeviceRadixSort::SortKeys(temp, *temp_bytes, in, out, n, 0, 32, stream);
}

LOCLAB_EXPORT int loclab_cub_sort_pairs_uint(void* temp, size_t* temp_bytes,
                                             const unsigned* keys_in, unsigned* keys_out,
                                             const unsigned* values_in, unsigned* values_out,
                                             long long n, cudaStream_t stream) {
    return cub::DeviceRadixSort::SortPairs(temp, *temp_bytes, keys_in, keys_out, values_in,
                                           values_out, n, 0, 32, stream);
}
