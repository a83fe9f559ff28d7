#pragma once
// Host reduction kernels for every DataType x ReduceOp. Written as plain loops
// over __restrict-qualified pointers so the compiler vectorises them. f16 and
// bf16 are widened to f32, combined, and rounded back (round-to-nearest-even)
// once per call. `avg` combines like `sum`; finish_avg divides at the end.

#include <comm/types.hpp>

#include <cstddef>
#include <cstdint>

namespace comm::kernels {

// dst[i] = a[i] (op) b[i]. dst may equal a or b exactly (not partially overlap).
void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op);

// data[i] /= nranks (floating types: true division; integers: truncation toward zero).
void finish_avg(void* data, std::size_t count, DataType dtype, int nranks);

float f16_to_f32(std::uint16_t h) noexcept;
std::uint16_t f32_to_f16(float f) noexcept;
float bf16_to_f32(std::uint16_t h) noexcept;
std::uint16_t f32_to_bf16(float f) noexcept;

}  // namespace comm::kernels
