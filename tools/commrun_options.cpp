#include "commrun_options.hpp"

#include "util/cli.hpp"
#include "util/transport_name.hpp"
#include "util/units.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace commrun {
namespace {

constexpr const char* kDescription = R"(Starts N ranks of `program` on this host. Each gets COMM_RANK, COMM_WORLD_SIZE,
COMM_LOCAL_RANK, COMM_STORE=H:<free port> (rank 0 hosts the store), a fresh
COMM_STORE_TOKEN and, with --transport, COMM_TRANSPORT. Output lines are
prefixed with [r<rank>]. When a rank fails the others get SIGTERM, then SIGKILL
after --grace seconds; commrun exits with the first failing rank's code
(128+signal for a signal), 124 on --timeout, 128+signal if interrupted.

Several hosts (torchrun's terms; run one commrun per host):
  commrun --nnodes N --node-rank K --master HOST:PORT -n LOCAL [--rank-offset O]
          [--world-size W] [--] program [args...]
starts LOCAL ranks with global ranks O+0 .. O+LOCAL-1 (default O = K*LOCAL) of a
job of W ranks (default N*LOCAL); COMM_LOCAL_RANK is 0..LOCAL-1. Node 0's first
rank (global rank 0) hosts the store at HOST:PORT, so HOST must be an address of
node 0 that the others reach. Hosts with different rank counts: give each commrun
its --rank-offset and the same --world-size. The store token is COMM_STORE_TOKEN
from the environment (give every node the same one), or none.)";

[[noreturn]] void multinode_error(const std::string& what) {
  std::fprintf(stderr, "commrun: %s (see commrun --help)\n", what.c_str());
  std::exit(2);
}

// Completes and checks the multi-node flags: defaults in torchrun's terms
// (equal ranks per node), explicit offsets for uneven nodes, and every
// global rank this node starts inside the job.
void check_multinode(Options& o) {
  MultiNode& m = o.multi;
  const bool multi = m.nnodes > 1 || !m.master.empty() || m.rank_offset >= 0 || m.world_size >= 0;
  if (!multi) return;
  if (m.master.empty()) multinode_error("--nnodes/--node-rank/--rank-offset/--world-size need --master HOST:PORT");
  const std::size_t colon = m.master.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == m.master.size() ||
      m.master.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    multinode_error("--master '" + m.master + "' is not HOST:PORT");
  const long port = std::strtol(m.master.c_str() + colon + 1, nullptr, 10);
  if (port < 1 || port > 65535) multinode_error("--master '" + m.master + "': port must be in [1, 65535]");
  if (m.node_rank >= m.nnodes)
    multinode_error("--node-rank " + std::to_string(m.node_rank) + " is not below --nnodes " +
                    std::to_string(m.nnodes));
  if (m.rank_offset < 0) m.rank_offset = m.node_rank * o.nranks;
  if (m.world_size < 0) m.world_size = m.nnodes * o.nranks;
  if (m.rank_offset + o.nranks > m.world_size)
    multinode_error("node " + std::to_string(m.node_rank) + " would start global ranks " +
                    std::to_string(m.rank_offset) + ".." + std::to_string(m.rank_offset + o.nranks - 1) +
                    " but the job has " + std::to_string(m.world_size) +
                    " (--world-size); nodes with different -n need --rank-offset and --world-size");
  if (m.node_rank == 0 && m.rank_offset != 0)
    multinode_error("--node-rank 0 must start global rank 0, which hosts the store (--rank-offset is " +
                    std::to_string(m.rank_offset) + ")");
  if (m.node_rank != 0 && m.rank_offset == 0)
    multinode_error("--node-rank " + std::to_string(m.node_rank) +
                    " starts global rank 0, which must run on node 0 (give --rank-offset)");
}

}  // namespace

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> program;
  comm::cli::Parser p("commrun", "commrun -n N [options] [--] program [args...]");
  p.description(kDescription);
  p.integer("-n,-np,--np", "N", "number of ranks (required)", o.nranks, 1, 1 << 20);
  p.text("--transport", "T", "sets COMM_TRANSPORT for every rank", o.transport);
  p.real("--timeout", "S", "stop the job after S seconds, first asking every rank for\nits flight recorder (then exit 124)",
         o.timeout_s, 0);
  p.real("--grace", "S", "seconds between SIGTERM and SIGKILL when stopping (default 5)", o.grace_s, 0);
  p.text("--host", "H", "address of the store rank 0 hosts (default 127.0.0.1)", o.host);
  p.list("--allow-fail", "R[,R...]",
         "rank R may fail without stopping the job or affecting the exit\ncode (fault-injection tests)",
         [&o](std::string_view list) {
           for (std::size_t pos = 0; pos <= list.size();) {
             const std::size_t comma = std::min(list.find(',', pos), list.size());
             const auto r = comm::util::parse_integer(list.substr(pos, comma - pos));
             if (!r || *r < 0 || *r >= (1 << 20)) throw comm::cli::BadValue("rank numbers >= 0 separated by commas");
             o.allow_fail.insert(static_cast<int>(*r));
             pos = comma + 1;
           }
         });
  p.text("--bind", "core|none",
         "core: rank r on the r-th core this process may use (all its hardware\n"
         "threads), the default when ranks <= cores, as mpirun; none: the scheduler\n"
         "places the ranks (the default when ranks > cores). COMM_LOG=info prints it",
         o.bind);
  p.section("several hosts");
  p.integer("--nnodes", "N", "hosts in the job, one commrun each (default 1)", o.multi.nnodes, 1, 1 << 20);
  p.integer("--node-rank", "K", "this host's index, 0..N-1 (default 0)", o.multi.node_rank, 0, 1 << 20);
  p.text("--master", "HOST:PORT", "the store: an address of node 0 every host reaches", o.multi.master);
  p.integer("--rank-offset", "O", "global rank of this host's first rank (default K*LOCAL)", o.multi.rank_offset,
            0, 1 << 20);
  p.integer("--world-size", "W", "ranks in the job (default N*LOCAL)", o.multi.world_size, 1, 1 << 20);
  bool no_prefix = false;
  p.flag("--no-prefix", "print the ranks' lines as they are, without [r<rank>]", no_prefix);
  p.rest("program [args...]", program);
  p.parse_or_exit(argc, argv);
  if (o.nranks <= 0) p.fail("-n N (number of ranks) is required");
  if (program.empty()) p.fail("no program given");
  if (!o.transport.empty() && !comm::util::is_plain_transport_name(o.transport))
    p.fail("--transport '" + o.transport + "' is not valid: expected " + std::string(comm::util::kTransportNameRule) +
           "; this build has: " + COMM_BUILT_TRANSPORTS);
  if (o.bind != "auto" && o.bind != "core" && o.bind != "none")
    p.fail("--bind '" + o.bind + "' is not valid: expected core or none");
  o.prefix = !no_prefix;
  o.program = std::move(program);
  check_multinode(o);
  return o;
}

}  // namespace commrun
