#include <comm/error.hpp>

namespace comm {

std::string_view to_string(ErrorCode c) noexcept {
  switch (c) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::unknown_algorithm: return "unknown_algorithm";
    case ErrorCode::unknown_transport: return "unknown_transport";
    case ErrorCode::invalid_config: return "invalid_config";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::peer_failed: return "peer_failed";
    case ErrorCode::aborted: return "aborted";
    case ErrorCode::mismatch: return "mismatch";
    case ErrorCode::transport_failure: return "transport_failure";
    case ErrorCode::communicator_failed: return "communicator_failed";
    case ErrorCode::store_failure: return "store_failure";
    case ErrorCode::internal: return "internal";
  }
  return "?";
}

bool is_usage_error(ErrorCode c) noexcept {
  switch (c) {
    case ErrorCode::invalid_argument:
    case ErrorCode::unsupported:
    case ErrorCode::unknown_algorithm:
    case ErrorCode::unknown_transport:
    case ErrorCode::invalid_config: return true;
    case ErrorCode::timeout:
    case ErrorCode::peer_failed:
    case ErrorCode::aborted:
    case ErrorCode::mismatch:
    case ErrorCode::transport_failure:
    case ErrorCode::communicator_failed:
    case ErrorCode::store_failure:
    case ErrorCode::internal: return false;
  }
  return false;
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

}  // namespace comm
