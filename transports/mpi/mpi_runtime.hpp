#pragma once
// Process-wide MPI state shared by every `mpi` transport: initialisation (only
// if the program has not initialised MPI itself) and finalisation at exit
// (only what we initialised), the thread level and the lock that serialises
// our MPI calls below MPI_THREAD_MULTIPLE, the record of failures that turns
// MPI_Finalize into MPI_Abort at exit, the watchdog of blocking collectives,
// user reduction operators for f16/bf16, and the MPI communicator a Config
// names. See README.md for the reasons behind each choice.

#include <comm/config.hpp>
#include <comm/error.hpp>
#include <comm/types.hpp>

#include "util/non_copyable.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace comm::mpi_detail {

/// The transport option that carries a handed-over communicator (its Fortran
/// handle, MPI_Comm_c2f, in decimal); include/comm/mpi.hpp sets it.
inline constexpr const char* kCommOption = "mpi.comm";
/// "block" (MPI's blocking collectives, watched) or "poll" (non-blocking ones
/// polled to our deadline); Config::transport_option: else COMM_MPI_NATIVE.
inline constexpr const char* kNativeOption = "mpi.native";

/// MPI_Error_string of `code`, e.g. "MPI_ERR_TRUNCATE: message truncated".
std::string error_string(int code);
/// Throws comm::Error(transport_failure) "<what>: <MPI error>" unless rc is MPI_SUCCESS.
void check(int rc, std::string_view what);

/// Serialises MPI calls when MPI gives less than MPI_THREAD_MULTIPLE; free otherwise.
class CallLock : NonCopyable {
 public:
  CallLock();
  ~CallLock();

 private:
  bool locked_ = false;
};

/// Watches blocking MPI calls, which nothing can interrupt: if one has not
/// returned by its deadline, a watchdog thread prints what was running and ends
/// the job with MPI_Abort (the only way out of a blocked MPI call). One Watch
/// per transport; arm() and disarm() are a few atomic stores, and the thread
/// (started by the first Watch) looks every 100 ms.
class Watch : NonCopyable {
 public:
  Watch();
  ~Watch();
  /// `what` must outlive the call (a literal or a to_string() result).
  void arm(std::string_view what, std::uint64_t seq, std::size_t bytes, std::chrono::milliseconds timeout) noexcept;
  void disarm() noexcept;

  struct Slot;

 private:
  Slot* slot_;
};

/// Initialises MPI (MPI_Init_thread, asking for MPI_THREAD_MULTIPLE) unless it
/// is initialised already; registers MPI_Finalize at exit only in that case.
/// Throws invalid_config if MPI was already finalised.
void ensure_initialized();
/// The thread level MPI provides (valid after ensure_initialized()).
int thread_level() noexcept;
/// Records a runtime failure of an mpi transport: at exit, a job in which
/// comm failed ends with MPI_Abort, because MPI_Finalize may wait forever for
/// a peer that is frozen or stuck in a call we abandoned. First reason wins.
void record_failure(const std::string& reason) noexcept;

/// The communicator `config` names (transport option mpi.comm), else MPI_COMM_WORLD.
/// Initialises MPI first when it is MPI_COMM_WORLD.
MPI_Comm base_comm(const Config* config);
/// "MPI_COMM_WORLD" or "the MPI communicator handed over (Fortran handle 3)".
std::string describe_base(const Config* config);
/// Whether native collectives block (watched) or poll, from the option or COMM_MPI_NATIVE.
bool native_blocks(const Config* config);

/// Polls `request` (MPI_Test, then yielding and sleeping in growing steps)
/// until it completes or `deadline` passes; false on timeout, when the request
/// is still pending. Throws transport_failure if MPI reports an error.
bool test_until(MPI_Request& request, std::chrono::steady_clock::time_point deadline, std::string_view what);

/// The MPI datatype of `t` (f16/bf16: MPI_UINT16_T, reduced by user_op()).
MPI_Datatype datatype(DataType t) noexcept;
/// True where MPI's predefined operator reduces `t` exactly as comm does.
bool predefined_op(DataType t) noexcept;
/// MPI_SUM/PROD/MIN/MAX (avg: MPI_SUM; the caller divides), or for f16/bf16 a
/// commutative user operator running comm's kernels (widened to f32, rounded
/// once per step), created on first use and freed at finalisation.
MPI_Op reduce_op(DataType t, ReduceOp op);

/// Live transports, so that an exit handler can withdraw their pending receives.
class Shutdownable {
 public:
  virtual void shutdown_before_finalize() noexcept = 0;

 protected:
  ~Shutdownable() = default;
};
void add_live(Shutdownable* t);
void remove_live(Shutdownable* t) noexcept;

}  // namespace comm::mpi_detail
