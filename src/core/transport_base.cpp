#include "core/transport_base.hpp"

#include <comm/error.hpp>

#include <cstdio>
#include <string>

namespace comm {

std::string tag_text(std::uint64_t tag) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(tag));
  return buf;
}

void TransportBase::check_peer(std::string_view op, int peer) const {
  if (peer < 0 || peer >= size_)
    throw Error(ErrorCode::invalid_argument, std::string(name_) + " " + std::string(op) + ": peer " +
                                                 std::to_string(peer) + " is outside [0, " +
                                                 std::to_string(size_) + ")");
}

void TransportBase::check_p2p_args(std::string_view op, int peer, std::uint64_t tag, const void* data,
                                   std::size_t bytes) const {
  check_peer(op, peer);
  const std::string what = std::string(name_) + " " + std::string(op);
  if (tag >> kTagBits)
    throw Error(ErrorCode::invalid_argument,
                what + ": tag " + tag_text(tag) + " uses more than " + std::to_string(kTagBits) + " bits");
  if (bytes > 0 && data == nullptr)
    throw Error(ErrorCode::invalid_argument, what + ": null buffer for " + std::to_string(bytes) + " B");
}

}  // namespace comm
