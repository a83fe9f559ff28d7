#include "gloo_transport.hpp"

#include <comm/version.hpp>

#include "util/c_locale.hpp"
#include "util/log.hpp"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/unbound_buffer.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <csignal>
#include <pthread.h>
#include <sched.h>
#include <mutex>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace comm {
namespace gloo_detail {

namespace {

// Gloo's own collectives build slots as (prefix << 56) | (tag << 24) + delta
// with prefixes 0x01..0x08. Ours carry 0x40 in the top byte, so the two can
// never meet on one pair.
constexpr std::uint64_t kSlotMarker = std::uint64_t{0x40} << 56;

// Gloo reports neither the length of a received message nor tolerates one
// longer than the posted receive (its event-loop thread aborts the process).
// Bits 48..55 of the slot therefore carry a hash of the byte count: a send and
// a receive of different sizes do not match, so a count mismatch between
// ranks surfaces as a timeout instead of a crash (255 times in 256).
std::uint64_t make_slot(std::uint64_t tag, std::size_t bytes) noexcept {
  const std::uint64_t size_hash = (static_cast<std::uint64_t>(bytes) * 0x9E3779B97F4A7C15ull) >> 56;
  return kSlotMarker | (size_hash << kTagBits) | tag;
}

// Link numbers measured on these machines: α is this transport's 8 B
// exchange (comm-bench --algo direct, 2 ranks over loopback: 23-25 us since
// the driving thread sleeps on the buffer itself); β is TRANSPORT-NOTES.md's
// Gloo TCP 16 MiB one-way rate. Calibration replaces both by default.
constexpr double kTcpAlphaUs = 24.0;
constexpr double kTcpBetaGbps = 2.8;
constexpr double kSelfAlphaUs = 0.1;
constexpr double kSelfBetaGbps = 13.7;

constexpr std::chrono::microseconds kSpinBeforeSleep{30};
// How long the driving thread sleeps on one operation while others are left
// unwatched, before completion threads take those (see sleep_on_one).
constexpr std::chrono::microseconds kSliceWithOthersUnwatched{200};

ErrorCode classify(std::string_view text) {
  const std::string lower = util::ascii_lower(text);
  auto has = [&](const char* s) { return lower.find(s) != std::string::npos; };
  if (has("timed out") || has("timeout")) return ErrorCode::timeout;
  if (has("closed") || has("reset") || has("broken pipe") || has("refused") || has("eof"))
    return ErrorCode::peer_failed;
  return ErrorCode::transport_failure;
}

std::string hint(ErrorCode code) {
  if (code == ErrorCode::timeout)
    return " (a Gloo timeout closes every connection of the communicator; create a new one)";
  if (code == ErrorCode::peer_failed) return " (the peer process exited, failed, or closed its connections)";
  return "";
}

// Gloo's rendezvous store interface over ours; every wait is bounded.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(std::shared_ptr<comm::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::string v = store_->get(key, timeout_);
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<comm::Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

Error translate_current_exception(std::string_view what) {
  const std::string prefix = std::string(what) + ": ";
  try {
    throw;
  } catch (const Error& e) {
    return e;
  } catch (const gloo::IoException& e) {
    const ErrorCode code = classify(e.what());
    return Error(code, prefix + "Gloo I/O error: " + e.what() + hint(code));
  } catch (const gloo::Exception& e) {
    return Error(ErrorCode::transport_failure, prefix + "Gloo error: " + e.what());
  } catch (const gloo::EnforceNotMet& e) {
    return Error(ErrorCode::transport_failure, prefix + "Gloo internal check failed: " + e.what());
  } catch (const std::exception& e) {
    return Error(ErrorCode::transport_failure, prefix + e.what());
  } catch (...) {
    return Error(ErrorCode::transport_failure, prefix + "unknown exception from Gloo");
  }
}

SigpipeBlock::SigpipeBlock() noexcept {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
}

SigpipeBlock::~SigpipeBlock() {
  if (!was_pending_) {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

/// A Gloo TCP unbound buffer whose completion can be looked at without
/// taking it, and slept on until a deadline of our own. Gloo's waitSend /
/// waitRecv are its only waits, and one that expires closes every connection
/// of the context. It uses Gloo's own mutex, counters and condition variable
/// (protected members of this Gloo version), so the completion that Gloo's
/// event loop signals wakes the thread sleeping here directly, as in Gloo's
/// own collectives. One thread at most sleeps on a buffer (Gloo notifies one).
class WatchedBuffer final : public gloo::transport::tcp::UnboundBuffer {
 public:
  WatchedBuffer(const std::shared_ptr<gloo::transport::tcp::Context>& context, void* ptr, std::size_t size,
                bool is_send)
      : UnboundBuffer(context, ptr, size), is_send_(is_send) {}

  /// Completed, failed or aborted: take() returns at once.
  bool finished() {
    std::lock_guard lock(m_);
    return finished_locked();
  }

  /// Sleeps until finished(), a wake() or the deadline; returns finished().
  bool sleep_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(m_);
    cv().wait_until(lock, deadline, [&] { return woken_ || finished_locked(); });
    woken_ = false;
    return finished_locked();
  }

  /// Ends the current sleep_until(), or the next one if none sleeps.
  void wake() {
    std::lock_guard lock(m_);
    woken_ = true;
    cv().notify_all();
  }

  /// Gloo's own wait: true if the operation completed, false if it was
  /// aborted; throws Gloo's error. Returns at once after finished().
  bool take(std::chrono::milliseconds backstop) {
    return is_send_ ? waitSend(nullptr, backstop) : waitRecv(nullptr, backstop);
  }

 private:
  bool finished_locked() const {
    if (ex_ != nullptr) return true;
    return is_send_ ? sendCompletions_ > 0 || abortWaitSend_ : recvCompletions_ > 0 || abortWaitRecv_;
  }
  std::condition_variable& cv() { return is_send_ ? sendCv_ : recvCv_; }

  const bool is_send_;
  bool woken_ = false;  // guarded by m_
};

namespace {

/// Gloo's rendezvous context, with the transport context it creates on
/// connecting in reach, so that our buffers can be built on it.
class MeshContext final : public gloo::rendezvous::Context {
 public:
  using gloo::rendezvous::Context::Context;
  std::shared_ptr<gloo::transport::Context> transport_context() const { return transportContext_; }
};

}  // namespace

/// One isend/irecv handed to Gloo. `completion` is null once cancelled.
struct GlooTransport::PendingOp {
  Completion* completion = nullptr;
  std::unique_ptr<WatchedBuffer> buffer;
  bool is_send = false;
  int peer = -1;
  std::uint64_t tag = 0;
  std::size_t bytes = 0;
  /// The driving thread slept a slice on it in vain while other operations
  /// were left unwatched (driving thread only).
  bool slept_a_slice = false;

  std::string describe() const {
    return std::string("gloo ") + (is_send ? "send to" : "recv from") + " rank " + std::to_string(peer) +
           " (tag " + tag_text(tag) + ", " + std::to_string(bytes) + " B)";
  }
};

/// A completion thread: it sleeps on one operation the driving thread does
/// not, and when that finishes queues it in finished_ and wakes the driving
/// thread. It never takes the result (the driving thread does). Threads are
/// reused; there are as many as operations were ever watched at once.
struct GlooTransport::Waiter {
  std::thread thread;
  std::condition_variable cv;
  std::shared_ptr<PendingOp> job;  // guarded by mutex_
};

GlooTransport::GlooTransport(const TransportInit& init)
    : NativeTransportBase("gloo", init, *this),
      timeout_(init.config ? init.config->timeout : std::chrono::milliseconds{300'000}),
      backstop_(timeout_ * 4 + std::chrono::seconds(60)) {
  if (!init.store)
    throw Error(ErrorCode::invalid_config, "gloo transport: no store was given to meet the other ranks");
  auto store = make_prefix_store(init.store, "gloo/");
  const std::string me = std::to_string(rank_);

  if (!init.peers || init.peers->size() != size_)
    throw Error(ErrorCode::invalid_argument,
                "gloo transport: TransportInit::peers must describe all " + std::to_string(size_) + " ranks");
  // Decide the listening address: COMM_IFACE if given; loopback when every
  // rank shares this host's kernel and network namespace; else the host name.
  const bool one_host = init.peers->num_hosts() == 1;
  std::string address;
  if (init.config && !init.config->iface.empty())
    address = init.config->iface;
  else if (one_host)
    address = "127.0.0.1";
  else
    address = (*init.peers)[rank_].hostname;
  store->set("addr/" + me, address);

  // Gloo's event-loop thread starts inside CreateDevice and inherits this mask.
  const SigpipeBlock no_sigpipe;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = address;
    {
      const LoopPlacement away_from_this_thread;
      device_ = gloo::transport::tcp::CreateDevice(attr);
    }
    auto mesh = std::make_shared<MeshContext>(rank_, size_);
    context_ = mesh;
    // Pairs copy the context timeout when connectFullMesh creates them.
    context_->setTimeout(timeout_);
    connect_watched(store);
    tcp_context_ = std::dynamic_pointer_cast<gloo::transport::tcp::Context>(mesh->transport_context());
    if (!tcp_context_) throw Error(ErrorCode::internal, "gloo transport: Gloo's context is not a TCP one");
  } catch (...) {
    throw translate_current_exception("gloo transport: rank " + me + " of " + std::to_string(size_) +
                                      " connecting from " + address);
  }

  peer_address_.resize(static_cast<std::size_t>(size_));
  same_host_.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const auto i = static_cast<std::size_t>(r);
    peer_address_[i] = store->get("addr/" + std::to_string(r), timeout_);
    same_host_[i] = init.peers->same_host(rank_, r);
  }
  COMM_INFO("gloo transport: rank " << rank_ << "/" << size_ << " on " << address << " ("
                                    << (one_host ? "all ranks on this host" : "several hosts") << ")");
}

// Gloo's connectFullMesh cannot be interrupted, and a peer that dies after
// publishing its address leaves it retrying the connection until its own
// timeout (minutes at the default COMM_TIMEOUT). So it runs on a thread of
// its own, which owns what it uses, while this one waits in the store for
// every rank to say it connected: the communicator's store ends that wait as
// soon as a rank fails, dies or is reported ended by the launcher, naming it.
// The abandoned thread ends at Gloo's timeout and frees what it holds.
void GlooTransport::connect_watched(const std::shared_ptr<Store>& store) {
  struct Attempt {
    std::mutex mu;
    std::exception_ptr error;
  };
  auto attempt = std::make_shared<Attempt>();
  const std::string mine = "connected/" + std::to_string(rank_);
  std::thread connect([context = context_, device = device_, store, timeout = timeout_, attempt, mine]() mutable {
    try {
      StoreAdapter adapter(store, timeout);
      context->connectFullMesh(adapter, device);
      store->set(mine, "1");
    } catch (...) {
      std::lock_guard lk(attempt->mu);
      attempt->error = std::current_exception();
    }
  });
  std::vector<std::string> everyone;
  for (int r = 0; r < size_; ++r) everyone.push_back("connected/" + std::to_string(r));
  constexpr auto kSlice = std::chrono::milliseconds(250);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  try {
    for (;;) {
      {
        std::lock_guard lk(attempt->mu);
        if (attempt->error) std::rethrow_exception(attempt->error);
      }
      try {
        store->wait(everyone, kSlice);
        break;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::timeout || std::chrono::steady_clock::now() >= deadline) throw;
      }
    }
  } catch (...) {
    connect.detach();
    throw;
  }
  connect.join();
}

GlooTransport::~GlooTransport() {
  // Operations still inside Gloo could touch their buffers after we return;
  // only closing the connections stops that. Without such operations the
  // context closes gently on destruction, so data already written still arrives.
  const bool live = std::any_of(pending_.begin(), pending_.end(),
                                [](const auto& entry) { return !entry.second->buffer->finished(); });
  if (live) close_connections("the transport was destroyed while operations were pending");
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& w : waiters_) {
      if (w->job) w->job->buffer->wake();
      w->cv.notify_all();
    }
  }
  for (const auto& w : waiters_)
    if (w->thread.joinable()) w->thread.join();
}

TransportCaps GlooTransport::caps() const noexcept {
  // Host memory only; wait() sleeps; a dead peer closes its socket, which Gloo sees at once.
  return TransportCaps{.host_memory = true, .cuda_memory = false, .stream_ordered = false, .can_block = true,
                       .peer_failure_detection = true};
}

LinkInfo GlooTransport::link(int peer) const {
  check_peer("link", peer);
  if (peer == rank_) return {LinkKind::self, kSelfAlphaUs, kSelfBetaGbps, "gloo self (memcpy)"};
  const auto i = static_cast<std::size_t>(peer);
  return {LinkKind::tcp, kTcpAlphaUs, kTcpBetaGbps,
          "gloo tcp " + peer_address_[i] + (same_host_[i] ? " (same host)" : " (other host)")};
}

void GlooTransport::isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) {
  check_p2p_args("isend", peer, tag, data, bytes);
  if (peer == rank_) return post_self(true, {&c, tag, data, nullptr, bytes});
  // Gloo's unbound buffer needs a writable pointer; a send only reads it.
  post(true, peer, tag, const_cast<void*>(data), bytes, c);
}

void GlooTransport::irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) {
  check_p2p_args("irecv", peer, tag, data, bytes);
  if (peer == rank_) return post_self(false, {&c, tag, nullptr, data, bytes});
  post(false, peer, tag, data, bytes, c);
}

void GlooTransport::post(bool is_send, int peer, std::uint64_t tag, void* data, std::size_t bytes,
                         Completion& c) {
  auto op = std::make_shared<PendingOp>();
  op->completion = &c;
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->bytes = bytes;
  if (failed_.load(std::memory_order_acquire)) {
    c.fail(ErrorCode::transport_failure, op->describe() + ": " + failure_reason());
    return;
  }
  // Gloo wants a non-null pointer even for an empty message.
  static std::byte empty_message[1];
  const SigpipeBlock no_sigpipe;
  try {
    op->buffer = std::make_unique<WatchedBuffer>(tcp_context_, data ? data : empty_message, bytes, is_send);
    if (is_send)
      op->buffer->send(peer, make_slot(tag, bytes), 0, bytes);
    else
      op->buffer->recv(peer, make_slot(tag, bytes), 0, bytes);
  } catch (...) {
    const Error e = translate_current_exception(op->describe());
    c.fail(e.code(), e.what());
    return;
  }
  pending_.emplace(&c, op);
  unwatched_.push_back(std::move(op));
}

void GlooTransport::hand_to_waiter(std::shared_ptr<PendingOp> op) {
  if (!idle_.empty()) {
    Waiter* w = idle_.back();
    idle_.pop_back();
    w->job = std::move(op);
    w->cv.notify_one();
    return;
  }
  auto w = std::make_unique<Waiter>();
  w->job = std::move(op);
  // Completion threads inherit the blocked SIGPIPE.
  const SigpipeBlock no_sigpipe;
  w->thread = std::thread(&GlooTransport::waiter_main, this, w.get());
  waiters_.push_back(std::move(w));
  COMM_DEBUG("gloo transport: " << waiters_.size() << " completion threads");
}

void GlooTransport::waiter_main(Waiter* w) {
  std::unique_lock lock(mutex_);
  for (;;) {
    w->cv.wait(lock, [&] { return w->job != nullptr || stopping_; });
    if (!w->job) return;
    const std::shared_ptr<PendingOp> op = w->job;
    bool finished = false;
    while (!finished && !stopping_ && op->completion) {
      lock.unlock();
      finished = op->buffer->sleep_until(std::chrono::steady_clock::now() + backstop_);
      lock.lock();
    }
    w->job.reset();
    if (finished && op->completion) {
      finished_.push_back(op);
      has_finished_.store(true, std::memory_order_release);
      if (foreground_) foreground_->wake();
      progress_cv_.notify_all();
    }
    if (stopping_) return;
    idle_.push_back(w);
  }
}

void GlooTransport::report(PendingOp& op, Completion& c) {
  try {
    if (op.buffer->take(backstop_))
      c.complete(op.bytes);
    else
      c.fail(ErrorCode::aborted, op.describe() + " was abandoned: " + failure_reason());
  } catch (...) {
    const Error e = translate_current_exception(op.describe());
    // Gloo has closed every pair of the context after its own wait expired.
    if (e.code() == ErrorCode::timeout) mark_failed(e.what());
    c.fail(e.code(), e.what());
  }
}

bool GlooTransport::any_finished() {
  if (has_finished_.load(std::memory_order_acquire)) return true;
  return std::any_of(unwatched_.begin(), unwatched_.end(), [](const auto& op) { return op->buffer->finished(); });
}

bool GlooTransport::progress() {
  std::vector<std::shared_ptr<PendingOp>> done;
  if (has_finished_.load(std::memory_order_acquire)) {
    std::lock_guard lock(mutex_);
    done.swap(finished_);
    has_finished_.store(false, std::memory_order_relaxed);
  }
  for (auto it = unwatched_.begin(); it != unwatched_.end();) {
    if ((*it)->buffer->finished()) {
      done.push_back(*it);
      it = unwatched_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& op : done) {
    pending_.erase(op->completion);
    report(*op, *op->completion);
  }
  return !done.empty();
}

void GlooTransport::wait(std::chrono::steady_clock::time_point deadline) {
  // A completion usually arrives within tens of microseconds; yielding until
  // then keeps this thread runnable, while sleeping at once costs a wake-up
  // and yielding lets Gloo's event loop run.
  const auto spin_until = std::min(deadline, std::chrono::steady_clock::now() + kSpinBeforeSleep);
  bool finished = any_finished();
  while (!finished && std::chrono::steady_clock::now() < spin_until) {
    sched_yield();
    finished = any_finished();
  }
  if (!finished) sleep_on_one(deadline);
}

// The driving thread sleeps on one operation's own condition variable, so
// that Gloo's event loop wakes it directly when that one completes: one
// thread hand-off per message, as in Gloo's own collectives, instead of two
// through a completion thread. It picks the oldest receive (what a schedule
// waits for), else the oldest send. The other unwatched operations are only
// looked at when it wakes, which is harmless when they finish first (the
// schedule needs them all) but must not last: after one slice slept in vain
// they go to completion threads, which wake this thread when they finish.
void GlooTransport::sleep_on_one(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (interrupted_ || !finished_.empty()) {
    interrupted_ = false;
    return;
  }
  if (unwatched_.empty()) {
    progress_cv_.wait_until(lock, deadline, [&] { return interrupted_ || !finished_.empty(); });
    interrupted_ = false;
    return;
  }
  auto fg = std::find_if(unwatched_.begin(), unwatched_.end(), [](const auto& op) { return !op->is_send; });
  if (fg == unwatched_.end()) fg = unwatched_.begin();
  const std::shared_ptr<PendingOp> mine = *fg;
  auto until = deadline;
  if (unwatched_.size() > 1) {
    if (!mine->slept_a_slice) {
      until = std::min(deadline, std::chrono::steady_clock::now() + kSliceWithOthersUnwatched);
    } else {
      try {
        for (const auto& op : unwatched_)
          if (op != mine) hand_to_waiter(op);
      } catch (const std::system_error& e) {
        // Operations inside Gloo that nothing would report: the connections
        // must go (that aborts them, and progress() reports them).
        lock.unlock();
        close_connections("rank " + std::to_string(rank_) + " could not start a completion thread (" + e.what() +
                          ")");
        return;
      }
      std::erase_if(unwatched_, [&](const auto& op) { return op != mine; });
    }
  }
  foreground_ = mine->buffer.get();
  lock.unlock();
  const bool finished = mine->buffer->sleep_until(until);
  lock.lock();
  foreground_ = nullptr;
  interrupted_ = false;
  if (!finished && until < deadline) mine->slept_a_slice = true;
}

void GlooTransport::interrupt() noexcept {
  std::lock_guard lock(mutex_);
  interrupted_ = true;
  if (foreground_) foreground_->wake();
  progress_cv_.notify_all();
}

void GlooTransport::cancel(Completion& c) noexcept {
  if (cancel_self(c)) return;
  const auto it = pending_.find(&c);
  if (it == pending_.end()) return;
  const std::shared_ptr<PendingOp> op = it->second;
  pending_.erase(it);
  std::erase(unwatched_, op);
  {
    // A completion thread that watches it stops and no longer reports it.
    std::lock_guard lock(mutex_);
    op->completion = nullptr;
    std::erase(finished_, op);
    op->buffer->wake();
  }
  if (op->buffer->finished()) return report(*op, c);
  close_connections("rank " + std::to_string(rank_) + " cancelled a " + op->describe() +
                    " that Gloo still held; Gloo cannot withdraw a posted operation, so every connection of "
                    "this communicator was closed");
  c.fail(ErrorCode::aborted, op->describe() + " cancelled");
}

void GlooTransport::close_connections(const std::string& reason) noexcept {
  mark_failed(reason);
  try {
    context_->closeConnections();
  } catch (...) {
    COMM_WARN("gloo transport: closing connections failed: "
              << translate_current_exception("closeConnections").what());
  }
  // A hard close does not wake Gloo's waits: abort every operation, so that
  // completion threads return and progress() reports them as abandoned.
  auto abort = [](PendingOp& op) {
    if (op.is_send)
      op.buffer->abortWaitSend();
    else
      op.buffer->abortWaitRecv();
  };
  for (const auto& op : unwatched_) abort(*op);
  std::lock_guard lock(mutex_);
  for (const auto& w : waiters_)
    if (w->job) abort(*w->job);
}

void GlooTransport::mark_failed(const std::string& reason) noexcept {
  std::lock_guard lock(mutex_);
  if (!failed_reason_.empty()) return;
  failed_reason_ = reason;
  failed_.store(true, std::memory_order_release);
  COMM_WARN("gloo transport on rank " << rank_ << " is now unusable: " << reason);
}

std::string GlooTransport::failure_reason() const {
  std::lock_guard lock(mutex_);
  return "the Gloo transport on rank " + std::to_string(rank_) + " is unusable since: " +
         (failed_reason_.empty() ? std::string("(no failure recorded)") : failed_reason_) +
         "; create a new communicator";
}

void GlooTransport::check_usable(std::string_view what) const {
  if (failed_.load(std::memory_order_acquire))
    throw Error(ErrorCode::transport_failure, std::string(what) + ": " + failure_reason());
}

void GlooTransport::post_self(bool is_send, const SelfMessage& mine) {
  auto& waiting = is_send ? self_recvs_ : self_sends_;
  const auto it = std::find_if(waiting.begin(), waiting.end(), [&](const SelfMessage& m) { return m.tag == mine.tag; });
  if (it == waiting.end()) {
    (is_send ? self_sends_ : self_recvs_).push_back(mine);
    return;
  }
  const SelfMessage other = *it;
  waiting.erase(it);
  if (is_send)
    match_self(mine, other);
  else
    match_self(other, mine);
}

void GlooTransport::match_self(const SelfMessage& send, const SelfMessage& recv) {
  if (send.bytes > recv.bytes) {
    const std::string msg = "gloo: rank " + std::to_string(rank_) + " sent " + std::to_string(send.bytes) +
                            " B to itself (tag " + tag_text(send.tag) + ") but the receive holds " +
                            std::to_string(recv.bytes) + " B";
    send.completion->fail(ErrorCode::mismatch, msg);
    recv.completion->fail(ErrorCode::mismatch, msg);
    return;
  }
  if (send.bytes) std::memcpy(recv.recv_data, send.send_data, send.bytes);
  send.completion->complete(send.bytes);
  recv.completion->complete(send.bytes);
}

bool GlooTransport::cancel_self(Completion& c) noexcept {
  for (auto* queue : {&self_sends_, &self_recvs_}) {
    const auto it = std::find_if(queue->begin(), queue->end(),
                                 [&](const SelfMessage& m) { return m.completion == &c; });
    if (it != queue->end()) {
      queue->erase(it);
      c.fail(ErrorCode::aborted, "gloo: message to self cancelled");
      return true;
    }
  }
  return false;
}

}  // namespace gloo_detail

void register_gloo_transport() {
  register_transport("gloo", [](const TransportInit& init) -> std::unique_ptr<Transport> {
    return std::make_unique<gloo_detail::GlooTransport>(init);
  });
  // Gloo has no run-time version call: the build recorded its package's.
  register_transport_library({"gloo", "Gloo", COMM_GLOO_VERSION, "package version at build time"});
}

}  // namespace comm
