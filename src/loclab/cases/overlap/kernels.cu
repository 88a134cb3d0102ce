// The overlap case's kernel: `rounds` fused multiply-adds v = a v + b on each element.
// One round is a memory-bound scaled add; thousands make the kernel longer than the copies.
// A grid-stride loop covers any n, so a chunk of any length is one launch.
__global__ void scaled_add_rounds(const float* __restrict__ in, float* __restrict__ out,
                                  long long n, float a, float b, int rounds) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = in[i];
#pragma unroll 4
        for (int r = 0; r < rounds; ++r) {
            v = fmaf(v, a, b);
        }
        out[i] = v;
    }
}
