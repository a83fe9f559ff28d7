// The lowering of direct-memory programs for the CUDA executor
// (transports/cuda_ipc/device_program.hpp), on the host: runs everywhere.
// The barriers it inserts are checked against an independent, pairwise
// search for hazards, over every rank's program of the real all-reduce
// algorithms and over hand-built programs with known answers.

#include "device_program.hpp"
#include "engine/direct/direct_algorithm.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace comm;
using namespace comm::cuda_ipc;

namespace {

struct Extent {
  DirectSpace space;
  int rank;
  std::uint64_t begin, end;
};

Extent extent(const DeviceRef& r, std::uint64_t bytes) {
  return {r.space, r.space == DirectSpace::window ? r.rank : -1, r.offset, r.offset + bytes};
}

bool meet(const Extent& a, const Extent& b) {
  return a.space == b.space && a.rank == b.rank && a.begin < b.end && b.begin < a.end;
}

bool is_data(const DeviceOp& op) { return op.kind == DeviceOpKind::copy || op.kind == DeviceOpKind::reduce; }

std::vector<Extent> writes(const DeviceOp& op) {
  std::vector<Extent> w{extent(op.dst, op.bytes)};
  if (op.has_dst2) w.push_back(extent(op.dst2, op.bytes));
  return w;
}

std::vector<Extent> reads(const DeviceProgram& p, const DeviceOp& op) {
  std::vector<Extent> r;
  for (std::uint32_t s = 0; s < op.num_srcs; ++s) r.push_back(extent(p.srcs[op.first_src + s], op.bytes));
  return r;
}

bool hazard(const DeviceProgram& p, const DeviceOp& early, const DeviceOp& late) {
  for (const Extent& w : writes(early)) {
    for (const Extent& r : reads(p, late))
      if (meet(w, r)) return true;
    for (const Extent& w2 : writes(late))
      if (meet(w, w2)) return true;
  }
  for (const Extent& r : reads(p, early))
    for (const Extent& w : writes(late))
      if (meet(r, w)) return true;
  return false;
}

// Every pair of data operations with a hazard has a barrier or a signal between them.
std::string unguarded(const DeviceProgram& p) {
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    if (!is_data(p.ops[i])) continue;
    for (std::size_t j = i + 1; j < p.ops.size(); ++j) {
      const DeviceOp& op = p.ops[j];
      if (op.kind == DeviceOpKind::barrier || op.kind == DeviceOpKind::signal) break;
      if (is_data(op) && hazard(p, p.ops[i], op))
        return "operations " + std::to_string(i) + " and " + std::to_string(j) + " race";
    }
  }
  return "";
}

// The lowered program is the original, in order, with barriers added.
void same_operations(const DirectProgram& in, const DeviceProgram& out) {
  std::size_t j = 0;
  for (const DirectOp& op : in.ops) {
    while (j < out.ops.size() && out.ops[j].kind == DeviceOpKind::barrier) ++j;
    REQUIRE(j < out.ops.size());
    const DeviceOp& d = out.ops[j++];
    CHECK(static_cast<int>(d.kind) == static_cast<int>(op.kind));  // the first four kinds coincide
    CHECK(d.bytes == op.bytes);
    CHECK(d.step == op.step);
    CHECK(d.rank == op.rank);
    CHECK(d.num_srcs == op.num_srcs);
  }
  while (j < out.ops.size() && out.ops[j].kind == DeviceOpKind::barrier) ++j;
  CHECK(j == out.ops.size());
}

}  // namespace

TEST_CASE("lowering keeps the all-reduce programs and guards every hazard") {
  for (const char* name : {"mem_oneshot", "mem_twoshot"}) {
    const direct::DirectAlgorithm* a = direct::find_direct_algorithm(Collective::allreduce, name);
    REQUIRE(a);
    for (int n : {1, 2, 3, 4, 8})
      for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{300000}})
        for (std::size_t window : {std::size_t{4096}, std::size_t{4} << 20}) {
          direct::DirectArgs args;
          args.nranks = n;
          args.count = count;
          args.elem_size = 4;
          args.window_bytes = window;
          if (a->eligible && !a->eligible(args)) continue;
          std::vector<DirectProgram> all;
          for (int r = 0; r < n; ++r) {
            args.rank = r;
            direct::ProgramBuilder b(r, n);
            a->build(args, b);
            all.push_back(std::move(b).finish());
          }
          direct::analyse(all);
          for (int r = 0; r < n; ++r) {
            CAPTURE(name);
            CAPTURE(n);
            CAPTURE(count);
            CAPTURE(window);
            CAPTURE(r);
            const DeviceProgram d = lower(all[static_cast<std::size_t>(r)]);
            same_operations(all[static_cast<std::size_t>(r)], d);
            CHECK(unguarded(d) == "");
            CHECK(d.synced == all[static_cast<std::size_t>(r)].synced);
            CHECK(d.steps == all[static_cast<std::size_t>(r)].steps);
          }
        }
  }
}

TEST_CASE("lowering adds a barrier exactly where an operation depends on another block's work") {
  using B = direct::ProgramBuilder;
  SUBCASE("disjoint operations need none") {
    B b(0, 2);
    b.copy(B::output(0), B::input(0), 64);
    b.copy(B::output(64), B::input(64), 64);
    const DeviceProgram d = lower(std::move(b).finish());
    CHECK(d.barriers == 0);
    CHECK(unguarded(d) == "");
  }
  SUBCASE("read after write") {
    B b(0, 2);
    b.copy(B::window(0, 64), B::input(0), 128);
    const DirectRef srcs[] = {B::window(0, 128), B::input(0)};
    b.reduce(B::output(0), srcs, 64);
    const DeviceProgram d = lower(std::move(b).finish());
    CHECK(d.barriers == 1);
    REQUIRE(d.ops.size() >= 3);
    CHECK(d.ops[1].kind == DeviceOpKind::barrier);
  }
  SUBCASE("write after read") {
    B b(0, 2);
    b.copy(B::output(0), B::window(0, 64), 64);
    b.copy(B::window(0, 100), B::input(0), 8);  // overwrites bytes the copy above reads
    CHECK(lower(std::move(b).finish()).barriers == 1);
  }
  SUBCASE("write after write, and the same bytes of another rank's window are not a hazard") {
    B b(0, 2);
    b.copy(B::output(0), B::window(1, 64), 64);
    b.copy(B::output(32), B::input(0), 64);
    b.copy(B::window(0, 64), B::input(0), 64);  // window 0, read above was window 1
    CHECK(lower(std::move(b).finish()).barriers == 1);
  }
  SUBCASE("a signal already orders everything before it") {
    B b(0, 2);
    b.copy(B::window(0, 64), B::input(0), 64);
    b.signal();
    b.copy(B::output(0), B::window(0, 64), 64);
    const DeviceProgram d = lower(std::move(b).finish());
    CHECK(d.barriers == 0);
    CHECK(unguarded(d) == "");
  }
}
