#pragma once
// Device reduction kernels of the NCCL stream engine: every DataType x ReduceOp,
// launched on the caller's stream (never synchronising the host, so they can
// be captured in a CUDA graph). f16 and bf16 are combined in f32 and rounded
// to nearest even once per call, like the host kernels of the core. Integer
// sum and prod wrap modulo 2^bits. `avg` combines like `sum`; launch_divide
// finishes it.

#include <comm/types.hpp>

#include <cuda_runtime.h>

#include <cstddef>

namespace comm::nccl {

// dst[i] = a[i] (op) b[i] for i < count. dst may equal a or b exactly.
// Returns the launch status (cudaSuccess for count == 0, which launches nothing).
cudaError_t launch_reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype,
                          ReduceOp op, cudaStream_t stream);

// data[i] /= divisor (floating types: true division, in f32 for f16/bf16;
// integers: truncation toward zero).
cudaError_t launch_divide(void* data, std::size_t count, DataType dtype, int divisor, cudaStream_t stream);

}  // namespace comm::nccl
