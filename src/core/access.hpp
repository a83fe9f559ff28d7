#pragma once
// How this repository's tools and tests reach a Communicator's internals;
// not part of the installed API (the public header only names the struct).

#include "core/communicator_impl.hpp"

#include <comm/communicator.hpp>

namespace comm::detail {

struct Access {
  static CommunicatorImpl& impl(const Communicator& c) { return c.impl(); }
};

}  // namespace comm::detail
