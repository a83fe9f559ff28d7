#pragma once
/// \file error.hpp
/// The single error vocabulary of the library. Every failure is a comm::Error
/// carrying an ErrorCode. Two families:
///  - usage errors (is_usage() == true): bad arguments or configuration,
///    detected before anything is sent; the communicator stays usable;
///  - runtime errors: timeouts, dead peers, transport failures, aborts; after
///    one the communicator is marked failed and every later call fails fast.

#include <comm/export.hpp>

#include <stdexcept>
#include <string>
#include <string_view>

namespace comm {

enum class ErrorCode {
  // usage
  invalid_argument,   ///< null buffer, count overflow, peer out of range, bad root...
  unsupported,        ///< dtype/op/memory kind not supported by this algorithm or transport
  unknown_algorithm,  ///< no algorithm of that name for that collective
  unknown_transport,  ///< no transport registered/loadable under that name
  invalid_config,     ///< malformed override string, environment variable or tuning file
  // runtime
  timeout,            ///< an operation did not complete in time
  peer_failed,        ///< a peer died or its connection broke
  aborted,            ///< Communicator::abort() was called
  mismatch,           ///< ranks called different collectives / counts (consistency check)
  transport_failure,  ///< the transport library reported an error
  communicator_failed,///< a call on a communicator already failed by an earlier error
  store_failure,      ///< the bootstrap store could not be reached or misbehaved
  internal,           ///< a bug in comm; please report it
};

COMM_API std::string_view to_string(ErrorCode c) noexcept;
/// True for the codes that denote bad input (thrown before anything is sent).
COMM_API bool is_usage_error(ErrorCode c) noexcept;

/// The exception type thrown by every comm API. what() is a complete sentence
/// naming the operation, what was wrong and, where possible, what to do.
class COMM_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }
  bool is_usage() const noexcept { return is_usage_error(code_); }

 private:
  ErrorCode code_;
};

}  // namespace comm
