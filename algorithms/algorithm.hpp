#pragma once
// Private interface between the core and the algorithm files. An algorithm is
// a pure function from (collective, rank, group size, sizes) to this rank's
// schedule; it never sees a transport, a buffer address, a dtype or an op.

#include <comm/schedule.hpp>
#include <comm/types.hpp>

#include <cstddef>
#include <span>
#include <string_view>

namespace comm::algo {

// Buffer conventions per collective (counts in elements):
//   allreduce       input[0,count) -> output[0,count); input may alias output.
//   reduce_scatter  input[0,nranks*count) -> output[0,count)
//   allgather       input[0,count) -> output[0,nranks*count)
//   broadcast       root: input[0,count); everyone: output[0,count). input and
//                   output alias on every rank (in-place API), so non-roots must
//                   only write output and roots must not write it at all.
//   reduce          input[0,count) -> output[0,count) on root only; non-roots
//                   must not touch output (use scratch).
//   all_to_all      input block j [j*count,(j+1)*count) -> rank j's output block rank.
//   all_to_allv     input[send_displs[j], +send_counts[j]) -> rank j's
//                   output[recv_displs[rank], +recv_counts[rank]).
//   barrier         count 0; exchanges zero-element messages only.
// Input/output aliasing: when `in_place` is set, input and output are one
// buffer (same address, same size): an algorithm must never read input[x]
// after a step has written output[x]. The executor passes in_place only for
// that exact form; any other overlap (the in-place allgather and
// reduce_scatter of the public API among them) it removes by copying the
// input first. Broadcast's buffers always alias, in_place or not.
struct AlgoArgs {
  Collective collective = Collective::allreduce;
  int rank = 0;
  int nranks = 1;
  std::size_t count = 0;
  std::size_t elem_size = 4;
  int root = 0;
  std::size_t chunk_elems = 1;  // pipeline chunk, >= 1 (from Config::chunk_bytes)
  bool in_place = false;        // input and output are the same buffer (see above)
  std::span<const std::size_t> send_counts{};  // all_to_allv only, nranks entries each
  std::span<const std::size_t> send_displs{};
  std::span<const std::size_t> recv_counts{};
  std::span<const std::size_t> recv_displs{};
};

struct Algorithm {
  std::string_view name;  // user-visible id, e.g. "ring"
  Collective collective;
  void (*build)(const AlgoArgs& args, ScheduleBuilder& out);
  // nullptr = eligible for every AlgoArgs; otherwise e.g. power-of-two sizes only.
  bool (*eligible)(const AlgoArgs& args);
  std::string_view summary;  // one line for comm-info / --help
};

// Every algorithm in the library (algorithms/registry.cpp lists them).
std::span<const Algorithm> all_algorithms();
// nullptr if there is no algorithm `name` for `c`.
const Algorithm* find_algorithm(Collective c, std::string_view name);

}  // namespace comm::algo
