#pragma once
// The `local` transport: ranks are threads of one process and exchange through
// memory. Used by the unit tests and the examples. Rendezvous semantics: a send
// completes when the receiver has copied the data, so no staging copies are
// made. A waiting rank blocks on a condition variable after a short spin.

#include <comm/transport.hpp>

namespace comm {

void register_local_transport();

}  // namespace comm
