"""GPUs as CUDA describes them, for tests of rules that read the GPU (no GPU needed)."""

from loclab.hw.gpu import GpuInfo

# An H200 as CUDA describes it.
H200 = GpuInfo(name="H200", compute_capability="9.0", sms=132, memory_bytes=0,
               l2_bytes=60 * 2**20, shared_mem_per_block=48 * 1024,
               shared_mem_per_block_optin=227 * 1024, shared_mem_per_sm=228 * 1024,
               registers_per_sm=65536, max_threads_per_sm=2048, max_threads_per_block=1024,
               clock_mhz=1980, memory_clock_mhz=3201, memory_bus_bits=6144,
               fp32_lanes_per_sm=128)
