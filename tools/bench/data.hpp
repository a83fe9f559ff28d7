#pragma once
// Deterministic benchmark data and its independent check (-c 1).
//
// Every input element is a function of (rank, index), so each rank computes
// the expected output of any collective locally. Reductions use small
// integers (1..5; prod uses 1..2) whose sums and products are exact in every
// type, including f16/bf16 at moderate rank counts; data-movement
// collectives use a pattern that differs per rank and index, so a misplaced
// block is caught.

#include "stats.hpp"

#include <comm/types.hpp>

#include <cstddef>
#include <cstdint>

namespace comm::bench {

// The value rank `rank` holds at input index `index`.
double input_value(BenchColl c, ReduceOp op, int rank, std::size_t index) noexcept;

// Writes `count` elements of input_value(c, op, rank, first + i) as `dtype`.
void fill_input(void* data, DataType dtype, std::size_t count, BenchColl c, ReduceOp op, int rank,
                std::size_t first = 0);

// Fills with a value no correct result equals (NaN for floats, the type's
// maximum for integers), so elements a collective forgot to write count as wrong.
void fill_poison(void* data, DataType dtype, std::size_t count);

struct CheckArgs {
  BenchColl coll = BenchColl::allreduce;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  std::size_t block = 0;  // Layout::block
};

// Number of wrong elements of this rank's output (`out` holds Layout::out_count
// elements; for broadcast the in-place buffer). Ranks whose output is not
// defined (reduce: non-roots; sendrecv: ranks above 1) return 0.
std::size_t count_wrong(const void* out, const CheckArgs& a);

// The expected reduction over ranks of input_value(.., index), as `dtype`
// rounds and wraps it, returned as a double.
double expected_reduction(BenchColl c, DataType dtype, ReduceOp op, int nranks, std::size_t index);

// IEEE half / bfloat16 conversions (round to nearest even), for fill and check.
std::uint16_t to_f16(float f) noexcept;
float from_f16(std::uint16_t h) noexcept;
std::uint16_t to_bf16(float f) noexcept;
float from_bf16(std::uint16_t h) noexcept;

}  // namespace comm::bench
