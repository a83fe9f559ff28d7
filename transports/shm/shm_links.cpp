// The link between two ranks of one `shm` communicator, for the cost model.
//
// Point-to-point messages cost a ring record each way: the sender copies into
// the segment, the receiver copies out (receiver_copies: its reduce steps and
// the copy-out share one core). Messages above the eager limit take the
// rendezvous: one cross-memory read (a system call, ~1 us more) when
// process_vm_readv is permitted, else a clear-to-send round trip plus
// streaming through the ring. Figures: 2 processes on the 2-core development
// VM (comm-bench --coll sendrecv over shm, UCX shm and memcpy in the same run).

#include "shm_transport.hpp"

namespace comm::shm {

LinkInfo shm_link(bool self, std::size_t eager_limit, bool cma) {
  if (self) return {LinkKind::self, 0.05, 10.0, "shm self"};
  LinkInfo l;
  l.kind = LinkKind::shm;
  l.alpha_us = 0.3;
  l.beta_gbps = 8.0;
  l.beta_large_gbps = 3.5;
  l.rndv_threshold_bytes = eager_limit;
  l.rndv_extra_us = cma ? 1.0 : 1.5;
  l.receiver_copies = true;
  l.detail = cma ? "shm rings + process_vm_readv" : "shm rings (streamed rendezvous)";
  return l;
}

}  // namespace comm::shm
