// Barrier through peer memory: every rank raises its flag and waits for
// everyone's. Nobody leaves before every rank has entered.

#include "engine/direct/direct_builders.hpp"

namespace comm::direct {

void build_barrier_direct(const DirectArgs&, ProgramBuilder& b) { b.wait_all(b.signal()); }

}  // namespace comm::direct
