// The public Communicator and Work: argument validation (usage errors before
// anything is sent) and translation of each call into a detail::Call.

#include "core/communicator_impl.hpp"

#include <limits>

namespace comm {

using detail::Call;
using detail::CommunicatorImpl;

namespace {

std::string name_of(Collective c) { return std::string(to_string(c)); }

void check_view(Collective c, const char* what, const void* data, std::size_t count, DataType dtype) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, dtype_size(dtype), &bytes))
    throw Error(ErrorCode::invalid_argument, name_of(c) + ": " + what + " count " + std::to_string(count) +
                                                 " overflows size_t bytes");
  if (count > 0 && data == nullptr)
    throw Error(ErrorCode::invalid_argument, name_of(c) + ": " + what + " buffer is null but its count is " +
                                                 std::to_string(count));
}

void check_same(Collective c, ConstView in, ConstView out) {
  if (in.dtype != out.dtype)
    throw Error(ErrorCode::invalid_argument, name_of(c) + ": input is " + std::string(to_string(in.dtype)) +
                                                 " but output is " + std::string(to_string(out.dtype)));
  if (in.memory != out.memory)
    throw Error(ErrorCode::invalid_argument, name_of(c) + ": input is in " + std::string(to_string(in.memory)) +
                                                 " memory but output is in " + std::string(to_string(out.memory)) +
                                                 " memory");
}

void check_rank(Collective c, const char* what, int r, int size) {
  if (r < 0 || r >= size)
    throw Error(ErrorCode::invalid_argument, name_of(c) + ": " + what + " " + std::to_string(r) +
                                                 " is outside [0, " + std::to_string(size) + ")");
}

Call make_call(Collective c, ConstView in, View out, const CallOptions& opts) {
  check_view(c, "input", in.data, in.count, in.dtype);
  check_view(c, "output", out.data, out.count, out.dtype);
  Call call;
  call.collective = c;
  call.input = in.data;
  call.output = out.data;
  call.in_bytes = in.bytes();
  call.out_bytes = out.bytes();
  call.dtype = in.dtype;
  call.memory = in.memory;
  call.options = &opts;
  return call;
}

std::size_t product(Collective c, std::size_t count, int size) {
  if (count > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(size))
    throw Error(ErrorCode::invalid_argument, name_of(c) + ": count " + std::to_string(count) + " x " +
                                                 std::to_string(size) + " ranks overflows");
  return count * static_cast<std::size_t>(size);
}

// `whole` must hold one `part` per rank.
void check_blocks(Collective c, const char* whole, std::size_t whole_count, const char* part, std::size_t part_count,
                  int size) {
  if (whole_count != product(c, part_count, size))
    throw Error(ErrorCode::invalid_argument, name_of(c) + ": " + whole + " must hold size() x " + part +
                                                 " count = " + std::to_string(size) + " x " +
                                                 std::to_string(part_count) + " elements, but has " +
                                                 std::to_string(whole_count));
}

}  // namespace

// ---- Work -----------------------------------------------------------------

bool Work::test() {
  if (!op_) return true;
  if (op_->state == detail::Operation::State::running && op_->comm) return op_->comm->test(*op_);
  if (op_->state == detail::Operation::State::failed) throw Error(op_->code, op_->message);
  return op_->state == detail::Operation::State::done;
}

void Work::wait() {
  if (!op_) return;
  if (op_->state == detail::Operation::State::running && op_->comm) {
    op_->comm->wait(*op_);
    return;
  }
  if (op_->state == detail::Operation::State::failed) throw Error(op_->code, op_->message);
}

bool Work::wait_for(std::chrono::milliseconds d) {
  if (!op_) return true;
  if (op_->state == detail::Operation::State::running && op_->comm)
    return op_->comm->wait(*op_, detail::Clock::now() + d);
  if (op_->state == detail::Operation::State::failed) throw Error(op_->code, op_->message);
  return op_->state == detail::Operation::State::done;
}

std::string_view Work::algorithm() const noexcept { return op_ ? std::string_view(op_->algorithm) : ""; }

// ---- Communicator: lifetime and introspection --------------------------------

Communicator::Communicator() noexcept = default;
Communicator::Communicator(std::unique_ptr<CommunicatorImpl> impl) noexcept : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

Communicator Communicator::create(const Config& config) { return create(config, nullptr); }
Communicator Communicator::create(const Config& config, std::shared_ptr<Store> store) {
  return Communicator(CommunicatorImpl::create(config, std::move(store)));
}

detail::CommunicatorImpl& Communicator::impl() const {
  if (!impl_)
    throw Error(ErrorCode::invalid_argument,
                "this Communicator is not valid (default-constructed, moved from, or a split with color < 0)");
  return *impl_;
}

int Communicator::rank() const { return impl().rank(); }
int Communicator::size() const { return impl().size(); }
const Config& Communicator::config() const { return impl().config(); }
std::string_view Communicator::transport_name() const { return impl().config().transport; }
const PeerTable& Communicator::peers() const { return impl().peers(); }
void Communicator::abort() noexcept {
  if (impl_) impl_->abort();
}
bool Communicator::failed() const noexcept { return impl_ && (impl_->failed() || impl_->aborted()); }

LinkInfo Communicator::link(int a, int b) const {
  check_rank(Collective::send, "rank", a, size());
  check_rank(Collective::send, "rank", b, size());
  return impl().links().at(a, b);
}
std::string Communicator::algorithm_for(Collective c, std::size_t bytes) const {
  return impl().selector().choose(c, bytes);
}
std::vector<CandidateCost> Communicator::candidates(Collective c, std::size_t bytes) const {
  return impl().selector().candidates(c, bytes);
}
std::vector<SelectionRange> Communicator::selection_table(Collective c, std::size_t max_bytes) const {
  return impl().selector().table(c, max_bytes);
}
std::vector<std::string> Communicator::algorithms(Collective c) const { return impl().selector().names(c); }
std::string Communicator::flight_recorder_json() const { return impl().flight_recorder_json(); }
std::vector<std::uint64_t> Communicator::bytes_sent() const { return impl().bytes_sent(); }

Communicator Communicator::split(int color, int key) { return Communicator(impl().split(color, key)); }

// ---- Communicator: collectives ----------------------------------------------

Work Communicator::iallreduce(ConstView in, View out, ReduceOp op, const CallOptions& opts) {
  const Collective c = Collective::allreduce;
  Call call = make_call(c, in, out, opts);
  check_same(c, in, out);
  if (in.count != out.count)
    throw Error(ErrorCode::invalid_argument, "allreduce: input has " + std::to_string(in.count) +
                                                 " elements but output has " + std::to_string(out.count));
  call.count = in.count;
  call.op = op;
  return Work(impl().start(call));
}

Work Communicator::ireduce_scatter(ConstView in, View out, ReduceOp op, const CallOptions& opts) {
  const Collective c = Collective::reduce_scatter;
  Call call = make_call(c, in, out, opts);
  check_same(c, in, out);
  check_blocks(c, "input", in.count, "output", out.count, size());
  call.count = out.count;
  call.op = op;
  return Work(impl().start(call));
}

Work Communicator::iallgather(ConstView in, View out, const CallOptions& opts) {
  const Collective c = Collective::allgather;
  Call call = make_call(c, in, out, opts);
  check_same(c, in, out);
  check_blocks(c, "output", out.count, "input", in.count, size());
  call.count = in.count;
  return Work(impl().start(call));
}

Work Communicator::ibroadcast(View buffer, int root, const CallOptions& opts) {
  const Collective c = Collective::broadcast;
  check_rank(c, "root", root, size());
  Call call = make_call(c, buffer, buffer, opts);
  call.count = buffer.count;
  call.root = root;
  return Work(impl().start(call));
}

Work Communicator::ireduce(ConstView in, View out, ReduceOp op, int root, const CallOptions& opts) {
  const Collective c = Collective::reduce;
  check_rank(c, "root", root, size());
  if (rank() != root) out = View{nullptr, 0, in.dtype, in.memory};
  Call call = make_call(c, in, out, opts);
  check_same(c, in, out);
  if (rank() == root && in.count != out.count)
    throw Error(ErrorCode::invalid_argument, "reduce: input has " + std::to_string(in.count) +
                                                 " elements but the root's output has " + std::to_string(out.count));
  call.count = in.count;
  call.op = op;
  call.root = root;
  return Work(impl().start(call));
}

Work Communicator::iall_to_all(ConstView in, View out, const CallOptions& opts) {
  const Collective c = Collective::all_to_all;
  Call call = make_call(c, in, out, opts);
  check_same(c, in, out);
  const auto n = static_cast<std::size_t>(size());
  if (in.count != out.count || in.count % n != 0)
    throw Error(ErrorCode::invalid_argument, "all_to_all: input (" + std::to_string(in.count) + ") and output (" +
                                                 std::to_string(out.count) +
                                                 ") must hold the same number of elements, a multiple of size() = " +
                                                 std::to_string(n));
  call.count = in.count / n;
  return Work(impl().start(call));
}

Work Communicator::iall_to_allv(ConstView in, std::span<const std::size_t> send_counts,
                                std::span<const std::size_t> send_displs, View out,
                                std::span<const std::size_t> recv_counts,
                                std::span<const std::size_t> recv_displs, const CallOptions& opts) {
  const Collective c = Collective::all_to_allv;
  Call call = make_call(c, in, out, opts);
  check_same(c, in, out);
  const auto n = static_cast<std::size_t>(size());
  if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n || recv_displs.size() != n)
    throw Error(ErrorCode::invalid_argument, "all_to_allv: counts and displacements need size() = " +
                                                 std::to_string(n) + " entries each");
  for (std::size_t j = 0; j < n; ++j) {
    if (send_displs[j] > in.count || send_counts[j] > in.count - send_displs[j])
      throw Error(ErrorCode::invalid_argument, "all_to_allv: block for rank " + std::to_string(j) + " [" +
                                                   std::to_string(send_displs[j]) + ", +" +
                                                   std::to_string(send_counts[j]) + ") exceeds the input's " +
                                                   std::to_string(in.count) + " elements");
    if (recv_displs[j] > out.count || recv_counts[j] > out.count - recv_displs[j])
      throw Error(ErrorCode::invalid_argument, "all_to_allv: block from rank " + std::to_string(j) + " [" +
                                                   std::to_string(recv_displs[j]) + ", +" +
                                                   std::to_string(recv_counts[j]) + ") exceeds the output's " +
                                                   std::to_string(out.count) + " elements");
  }
  call.send_counts = send_counts;
  call.send_displs = send_displs;
  call.recv_counts = recv_counts;
  call.recv_displs = recv_displs;
  return Work(impl().start(call));
}

Work Communicator::isend(ConstView buffer, int peer, const CallOptions& opts) {
  const Collective c = Collective::send;
  check_rank(c, "peer", peer, size());
  Call call = make_call(c, buffer, View{nullptr, 0, buffer.dtype, buffer.memory}, opts);
  call.count = buffer.count;
  call.root = peer;
  return Work(impl().start(call));
}

Work Communicator::irecv(View buffer, int peer, const CallOptions& opts) {
  const Collective c = Collective::recv;
  check_rank(c, "peer", peer, size());
  Call call = make_call(c, ConstView{nullptr, 0, buffer.dtype, buffer.memory}, buffer, opts);
  call.count = buffer.count;
  call.root = peer;
  return Work(impl().start(call));
}

Work Communicator::ibarrier(const CallOptions& opts) {
  Call call = make_call(Collective::barrier, ConstView{}, View{}, opts);
  return Work(impl().start(call));
}

// Blocking all-reduces that repeat the last one take the repeat path
// (core/repeat_allreduce.cpp); the rest, and every check, go through iallreduce.
void Communicator::allreduce(ConstView in, View out, ReduceOp op, const CallOptions& opts) {
  if (impl_ && in.dtype == out.dtype && in.count == out.count && in.memory == MemoryKind::host &&
      out.memory == MemoryKind::host && impl_->repeat_allreduce(in.data, out.data, in.count, in.dtype, op, opts))
    return;
  iallreduce(in, out, op, opts).wait();
}
void Communicator::allreduce(View inout, ReduceOp op, const CallOptions& opts) { allreduce(inout, inout, op, opts); }
void Communicator::reduce_scatter(ConstView in, View out, ReduceOp op, const CallOptions& opts) {
  ireduce_scatter(in, out, op, opts).wait();
}
void Communicator::allgather(ConstView in, View out, const CallOptions& opts) { iallgather(in, out, opts).wait(); }
void Communicator::broadcast(View buffer, int root, const CallOptions& opts) { ibroadcast(buffer, root, opts).wait(); }
void Communicator::reduce(ConstView in, View out, ReduceOp op, int root, const CallOptions& opts) {
  ireduce(in, out, op, root, opts).wait();
}
void Communicator::all_to_all(ConstView in, View out, const CallOptions& opts) { iall_to_all(in, out, opts).wait(); }
void Communicator::all_to_allv(ConstView in, std::span<const std::size_t> send_counts,
                               std::span<const std::size_t> send_displs, View out,
                               std::span<const std::size_t> recv_counts, std::span<const std::size_t> recv_displs,
                               const CallOptions& opts) {
  iall_to_allv(in, send_counts, send_displs, out, recv_counts, recv_displs, opts).wait();
}
void Communicator::send(ConstView buffer, int peer, const CallOptions& opts) { isend(buffer, peer, opts).wait(); }
void Communicator::recv(View buffer, int peer, const CallOptions& opts) { irecv(buffer, peer, opts).wait(); }
void Communicator::barrier(const CallOptions& opts) { ibarrier(opts).wait(); }

}  // namespace comm
