#include "mpi_runtime.hpp"

#include "engine/reduce_kernels.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

namespace comm::mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Everything process-wide. Allocated once and never freed: the exit handler
// and the detached watchdog thread may use it during static destruction.
struct State {
  std::mutex mu;  // guards the fields below except where noted
  bool initialized_by_us = false;
  std::atomic<int> level{-1};
  std::atomic<bool> need_lock{true};
  std::mutex call_mu;  // CallLock, below MPI_THREAD_MULTIPLE
  std::string failure;
  std::vector<Shutdownable*> live;
  MPI_Op user_ops[2][4] = {};  // [f16, bf16][sum, prod, min, max]

  std::mutex watch_mu;  // guards slots and the watchdog thread's start
  std::vector<Watch::Slot*> slots;
  bool watchdog_started = false;
};

State& state() {
  static State* s = new State;
  return *s;
}

std::string level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "thread level " + std::to_string(level);
  }
}

int world_rank() noexcept {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void free_user_ops(State& s) noexcept {
  for (auto& row : s.user_ops)
    for (MPI_Op& op : row)
      if (op != MPI_OP_NULL && op != MPI_Op{}) {
        MPI_Op_free(&op);
        op = MPI_OP_NULL;
      }
}

// Registered with atexit only when we initialised MPI.
void finalize_at_exit() {
  State& s = state();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  std::vector<Shutdownable*> live;
  std::string failure;
  {
    std::lock_guard lk(s.mu);
    live = s.live;
    failure = s.failure;
  }
  for (Shutdownable* t : live) t->shutdown_before_finalize();
  if (!failure.empty()) {
    std::fprintf(stderr,
                 "comm: rank %d: an mpi communicator failed (%s); ending the job with MPI_Abort, because "
                 "MPI_Finalize could wait forever for a peer that is frozen or stuck\n",
                 world_rank(), failure.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  free_user_ops(s);
  MPI_Finalize();
}

}  // namespace

// ---- errors -------------------------------------------------------------------

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

void check(int rc, std::string_view what) {
  if (rc != MPI_SUCCESS) throw Error(ErrorCode::transport_failure, std::string(what) + ": " + error_string(rc));
}

// ---- thread level, initialisation, failure -----------------------------------------

CallLock::CallLock() {
  State& s = state();
  if (s.need_lock.load(std::memory_order_relaxed)) {
    s.call_mu.lock();
    locked_ = true;
  }
}

CallLock::~CallLock() {
  if (locked_) state().call_mu.unlock();
}

void ensure_initialized() {
  State& s = state();
  std::lock_guard lk(s.mu);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    throw Error(ErrorCode::invalid_config,
                "mpi transport: MPI has already been finalised in this process; create (and destroy) mpi "
                "communicators before MPI_Finalize");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // MULTIPLE lets communicators be driven from different threads and the
    // watchdog call MPI_Abort while another thread is blocked inside MPI.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "mpi transport: MPI_Init_thread");
    s.initialized_by_us = true;
    std::atexit(finalize_at_exit);
  } else {
    check(MPI_Query_thread(&provided), "mpi transport: MPI_Query_thread");
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    int main_thread = 0;
    MPI_Is_thread_main(&main_thread);
    if (!main_thread)
      throw Error(ErrorCode::invalid_config,
                  "mpi transport: MPI was initialised with " + level_name(provided) +
                      ", which allows MPI calls from the main thread only, and this is another thread; "
                      "initialise MPI with MPI_Init_thread(MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE) or use "
                      "comm from the main thread");
  }
  s.level.store(provided);
  s.need_lock.store(provided < MPI_THREAD_MULTIPLE);
}

int thread_level() noexcept { return state().level.load(); }

void record_failure(const std::string& reason) noexcept {
  State& s = state();
  std::lock_guard lk(s.mu);
  if (s.failure.empty()) s.failure = reason;
}

void add_live(Shutdownable* t) {
  State& s = state();
  std::lock_guard lk(s.mu);
  s.live.push_back(t);
}

void remove_live(Shutdownable* t) noexcept {
  State& s = state();
  std::lock_guard lk(s.mu);
  s.live.erase(std::remove(s.live.begin(), s.live.end(), t), s.live.end());
}

// ---- the watchdog ------------------------------------------------------------

struct Watch::Slot {
  std::atomic<std::int64_t> deadline_ns{0};  // 0: not armed
  std::atomic<const char*> what{nullptr};
  std::atomic<std::size_t> what_len{0};
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::size_t> bytes{0};
  std::atomic<std::int64_t> armed_ns{0};
};

namespace {

[[noreturn]] void fire(const Watch::Slot& slot, std::int64_t now) {
  const double waited = static_cast<double>(now - slot.armed_ns.load()) / 1e9;
  const std::string what(slot.what.load(), slot.what_len.load());
  std::fprintf(stderr,
               "comm: rank %d: mpi %s #%llu (%zu B) has not returned after %.1f s; a blocking MPI call cannot be "
               "interrupted, so the job ends with MPI_Abort (COMM_MPI_NATIVE=poll turns this into a comm::Error "
               "of the caller; raise COMM_TIMEOUT if the peers are merely slow)\n",
               world_rank(), what.c_str(), static_cast<unsigned long long>(slot.seq.load()), slot.bytes.load(),
               waited);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void watchdog_main() {
  State& s = state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard lk(s.watch_mu);
    const std::int64_t now = now_ns();
    for (const Watch::Slot* slot : s.slots) {
      const std::int64_t d = slot->deadline_ns.load(std::memory_order_acquire);
      if (d != 0 && now > d) fire(*slot, now);
    }
  }
}

}  // namespace

Watch::Watch() : slot_(new Slot) {
  State& s = state();
  std::lock_guard lk(s.watch_mu);
  s.slots.push_back(slot_);
  if (!s.watchdog_started) {
    std::thread(watchdog_main).detach();
    s.watchdog_started = true;
  }
}

Watch::~Watch() {
  State& s = state();
  {
    std::lock_guard lk(s.watch_mu);
    s.slots.erase(std::remove(s.slots.begin(), s.slots.end(), slot_), s.slots.end());
  }
  delete slot_;
}

void Watch::arm(std::string_view what, std::uint64_t seq, std::size_t bytes,
                std::chrono::milliseconds timeout) noexcept {
  const std::int64_t now = now_ns();
  slot_->what.store(what.data(), std::memory_order_relaxed);
  slot_->what_len.store(what.size(), std::memory_order_relaxed);
  slot_->seq.store(seq, std::memory_order_relaxed);
  slot_->bytes.store(bytes, std::memory_order_relaxed);
  slot_->armed_ns.store(now, std::memory_order_relaxed);
  slot_->deadline_ns.store(now + std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count(),
                           std::memory_order_release);
}

void Watch::disarm() noexcept { slot_->deadline_ns.store(0, std::memory_order_release); }

// ---- configuration -------------------------------------------------------------

MPI_Comm base_comm(const Config* config) {
  if (config) {
    const auto it = config->transport_options.find(kCommOption);
    if (it != config->transport_options.end()) {
      int initialized = 0;
      MPI_Initialized(&initialized);
      if (!initialized)
        throw Error(ErrorCode::invalid_config, std::string("mpi transport: transport option ") + kCommOption +
                                                   " names an MPI communicator, but MPI is not initialised");
      long long handle = 0;
      const std::string& text = it->second;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), handle);
      if (ec != std::errc{} || end != text.data() + text.size())
        throw Error(ErrorCode::invalid_config, std::string("mpi transport: transport option ") + kCommOption +
                                                   "='" + text +
                                                   "' is not a communicator handle (MPI_Comm_c2f, in decimal; "
                                                   "comm::mpi::config() sets it)");
      ensure_initialized();
      const MPI_Comm c = MPI_Comm_f2c(static_cast<MPI_Fint>(handle));
      if (c == MPI_COMM_NULL)
        throw Error(ErrorCode::invalid_config, std::string("mpi transport: transport option ") + kCommOption +
                                                   " names MPI_COMM_NULL");
      return c;
    }
  }
  ensure_initialized();
  return MPI_COMM_WORLD;
}

std::string describe_base(const Config* config) {
  if (config) {
    const auto it = config->transport_options.find(kCommOption);
    if (it != config->transport_options.end())
      return "the MPI communicator handed over (Fortran handle " + it->second + ")";
  }
  return "MPI_COMM_WORLD";
}

bool native_blocks(const Config* config) {
  const std::string value = config ? config->transport_option("mpi", "native") : std::string();
  if (value.empty() || value == "block") return true;
  if (value == "poll") return false;
  const std::string source = config->transport_options.count(kNativeOption)
                                 ? std::string("transport option ") + kNativeOption
                                 : Config::transport_option_variable("mpi", "native");
  throw Error(ErrorCode::invalid_config,
              source + "='" + value +
                  "' is not valid: expected 'block' (MPI's blocking collectives; a timeout aborts the job) or "
                  "'poll' (MPI's non-blocking collectives polled; a timeout is a comm::Error)");
}

// ---- waiting -------------------------------------------------------------------

bool test_until(MPI_Request& request, Clock::time_point deadline, std::string_view what) {
  // Spin first (a collective among idle ranks finishes in microseconds), then
  // yield, then sleep in steps growing to 1 ms so a long wait costs no core.
  constexpr auto kSpin = std::chrono::microseconds(50);
  constexpr auto kMaxSleep = std::chrono::microseconds(1000);
  const auto start = Clock::now();
  auto sleep = std::chrono::microseconds(1);
  for (;;) {
    int done = 0;
    {
      CallLock lock;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    }
    if (done) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now - start < kSpin) continue;
    if (now - start < 4 * kSpin) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(sleep, deadline - now));
    sleep = std::min(sleep * 2, kMaxSleep);
  }
}

// ---- datatypes and operators -------------------------------------------------------

MPI_Datatype datatype(DataType t) noexcept {
  switch (t) {
    case DataType::f32: return MPI_FLOAT;
    case DataType::f64: return MPI_DOUBLE;
    case DataType::f16:
    case DataType::bf16: return MPI_UINT16_T;
    case DataType::i8: return MPI_INT8_T;
    case DataType::u8: return MPI_UINT8_T;
    case DataType::i32: return MPI_INT32_T;
    case DataType::i64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

bool predefined_op(DataType t) noexcept { return t != DataType::f16 && t != DataType::bf16; }

namespace {

template <DataType T, ReduceOp Op>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  // MPI's contract: inout[i] = in[i] op inout[i].
  kernels::reduce(inout, in, inout, static_cast<std::size_t>(*len), T, Op);
}

template <DataType T>
MPI_User_function* user_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return &user_reduce<T, ReduceOp::sum>;
    case ReduceOp::prod: return &user_reduce<T, ReduceOp::prod>;
    case ReduceOp::min: return &user_reduce<T, ReduceOp::min>;
    case ReduceOp::max: return &user_reduce<T, ReduceOp::max>;
  }
  return nullptr;
}

int op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return 0;
    case ReduceOp::prod: return 1;
    case ReduceOp::min: return 2;
    case ReduceOp::max: return 3;
  }
  return 0;
}

}  // namespace

MPI_Op reduce_op(DataType t, ReduceOp op) {
  if (predefined_op(t)) {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return MPI_SUM;
      case ReduceOp::prod: return MPI_PROD;
      case ReduceOp::min: return MPI_MIN;
      case ReduceOp::max: return MPI_MAX;
    }
  }
  State& s = state();
  std::lock_guard lk(s.mu);
  MPI_Op& slot = s.user_ops[t == DataType::f16 ? 0 : 1][op_index(op)];
  if (slot == MPI_Op{} || slot == MPI_OP_NULL) {
    MPI_User_function* fn = t == DataType::f16 ? user_function<DataType::f16>(op) : user_function<DataType::bf16>(op);
    check(MPI_Op_create(fn, /*commute=*/1, &slot), "mpi transport: MPI_Op_create");
  }
  return slot;
}

}  // namespace comm::mpi_detail
