// Lowering of direct-memory programs for the CUDA executor (device_program.hpp).

#include "device_program.hpp"

#include <comm/error.hpp>

#include <algorithm>

namespace comm::cuda_ipc {
namespace {

struct Range {
  DirectSpace space;
  int rank;
  std::size_t begin, end;
};

Range range_of(const DirectRef& r, std::size_t bytes) {
  return {r.space, r.space == DirectSpace::window ? r.rank : -1, r.offset, r.offset + bytes};
}

bool overlaps(const Range& a, const Range& b) {
  return a.space == b.space && a.rank == b.rank && a.begin < b.end && b.begin < a.end;
}

bool any_overlap(const std::vector<Range>& set, const Range& r) {
  return std::any_of(set.begin(), set.end(), [&](const Range& s) { return overlaps(s, r); });
}

DeviceRef to_device(const DirectRef& r) { return {r.space, r.rank, r.offset}; }

// What the operations since the last grid-wide barrier read and wrote.
struct Hazards {
  std::vector<Range> reads, writes;
  void clear() {
    reads.clear();
    writes.clear();
  }
  // True when `op` must not start before every block finished the earlier operations:
  // it reads what they wrote, or writes what they read or wrote.
  bool conflicts(const DirectProgram& p, const DirectOp& op) const {
    for (std::uint32_t s = 0; s < op.num_srcs; ++s)
      if (any_overlap(writes, range_of(p.srcs[op.first_src + s], op.bytes))) return true;
    auto dst_conflicts = [&](const DirectRef& d) {
      const Range r = range_of(d, op.bytes);
      return any_overlap(writes, r) || any_overlap(reads, r);
    };
    return dst_conflicts(op.dst) || (op.has_dst2 && dst_conflicts(op.dst2));
  }
  void add(const DirectProgram& p, const DirectOp& op) {
    for (std::uint32_t s = 0; s < op.num_srcs; ++s) reads.push_back(range_of(p.srcs[op.first_src + s], op.bytes));
    writes.push_back(range_of(op.dst, op.bytes));
    if (op.has_dst2) writes.push_back(range_of(op.dst2, op.bytes));
  }
};

}  // namespace

DeviceProgram lower(const DirectProgram& program) {
  // The CUDA memory offers no PeerReads (DirectMemory::peer_reads), so no eligible program reads peer buffers.
  if (program.reads_peers || program.scratch_bytes > 0)
    throw Error(ErrorCode::internal,
                "cuda_ipc: a direct-memory program that reads peers' buffers or uses private scratch cannot be lowered");
  DeviceProgram out;
  out.steps = program.steps;
  out.synced = program.synced;
  out.srcs.reserve(program.srcs.size());
  for (const DirectRef& r : program.srcs) out.srcs.push_back(to_device(r));
  Hazards hz;
  for (const DirectOp& op : program.ops) {
    DeviceOp d;
    d.rank = op.rank;
    d.step = op.step;
    d.first_src = op.first_src;
    d.num_srcs = op.num_srcs;
    d.bytes = op.bytes;
    d.has_dst2 = op.has_dst2 ? 1 : 0;
    d.dst = to_device(op.dst);
    d.dst2 = to_device(op.dst2);
    switch (op.kind) {
      case DirectOpKind::copy:
      case DirectOpKind::reduce:
        // An exact in-place element (dst == srcs[0]) is read and written by the same thread: no hazard
        // within the operation itself; only earlier operations count.
        if (hz.conflicts(program, op)) {
          DeviceOp b;
          b.kind = DeviceOpKind::barrier;
          out.ops.push_back(b);
          ++out.barriers;
          hz.clear();
        }
        d.kind = op.kind == DirectOpKind::copy ? DeviceOpKind::copy : DeviceOpKind::reduce;
        hz.add(program, op);
        out.largest_op = std::max<std::size_t>(out.largest_op, op.bytes);
        break;
      case DirectOpKind::signal:
        d.kind = DeviceOpKind::signal;  // includes a grid barrier
        hz.clear();
        break;
      case DirectOpKind::wait:
        d.kind = DeviceOpKind::wait;
        break;
    }
    out.ops.push_back(d);
  }
  return out;
}

}  // namespace comm::cuda_ipc
