#pragma once
// commrun's command line: what it starts, where the ranks meet, and the
// multi-node flags in torchrun's terms, checked before any rank starts.

#include <set>
#include <string>
#include <vector>

namespace commrun {

// Multi-node launch in torchrun's terms (see parse_multinode): this commrun
// starts `nranks` local ranks whose global ranks are rank_offset + i, in a
// job of world_size ranks that meets at `master` (node 0's rank 0 hosts the store).
struct MultiNode {
  int nnodes = 1;
  int node_rank = 0;
  int rank_offset = -1;  // -1: node_rank * nranks
  int world_size = -1;   // -1: nnodes * nranks
  std::string master;    // HOST:PORT; "" = single node (commrun picks a port)
};

struct Options {
  int nranks = 0;
  MultiNode multi;
  std::string transport;
  double timeout_s = 0;
  double grace_s = 5;
  std::string host = "127.0.0.1";
  std::string bind = "auto";  // core, none; auto = core when ranks <= cores
  bool prefix = true;
  std::set<int> allow_fail;
  std::vector<std::string> program;  // program and its arguments
};

// Parses and checks the command line; prints usage and exits 2 on bad input.
Options parse_args(int argc, char** argv);

inline bool multinode(const Options& o) { return !o.multi.master.empty(); }
inline int global_rank(const Options& o, int local) { return multinode(o) ? o.multi.rank_offset + local : local; }
inline int world_size(const Options& o) { return multinode(o) ? o.multi.world_size : o.nranks; }

}  // namespace commrun
