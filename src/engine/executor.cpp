#include "engine/executor.hpp"

#include "engine/reduce_kernels.hpp"

#include <algorithm>
#include <cstring>

namespace comm {

void Execution::start(std::shared_ptr<const Schedule> schedule, ExecBuffers buffers, DataType dtype,
                      ReduceOp op, std::uint64_t tag_base) {
  cancel();
  schedule_ = std::move(schedule);
  buffers_ = buffers;
  dtype_ = dtype;
  op_ = op;
  esize_ = dtype_size(dtype);
  tag_base_ = tag_base;
  total_ = schedule_->steps.size();
  completed_ = 0;
  failed_ = false;
  error_message_.clear();
  error_peer_ = -1;
  if (total_ > completions_capacity_) {
    completions_ = std::make_unique<Completion[]>(total_);
    completions_capacity_ = total_;
  } else {
    for (std::size_t i = 0; i < total_; ++i) completions_[i].reset();
  }
  const auto& steps = schedule_->steps;
  missing_deps_.resize(total_);
  ready_.clear();
  in_flight_.clear();
  // ready_ is a stack: push in reverse so steps run in schedule order where possible.
  for (std::size_t i = total_; i-- > 0;) {
    missing_deps_[i] = steps[i].num_deps;
    if (steps[i].num_deps == 0) ready_.push_back(static_cast<StepId>(i));
  }
}

Execution::~Execution() { cancel(); }

std::byte* Execution::address(const Region& r) const {
  std::byte* base = nullptr;
  switch (r.buffer) {
    case BufferId::input: base = const_cast<std::byte*>(buffers_.input); break;
    case BufferId::output: base = buffers_.output; break;
    case BufferId::scratch: base = buffers_.scratch; break;
  }
  return base + r.offset * esize_;
}

void Execution::finish_step(StepId s) {
  ++completed_;
  for (StepId d : schedule_->dependents_of(s))
    if (--missing_deps_[d] == 0) ready_.push_back(d);
}

void Execution::run_local_step(StepId s) {
  const Step& st = schedule_->steps[s];
  const std::size_t n = st.dst.count;
  if (n) {
    std::byte* dst = address(st.dst);
    const std::byte* a = address(st.src);
    if (st.kind == StepKind::copy) {
      if (dst != a) std::memmove(dst, a, n * esize_);
    } else {
      kernels::reduce(dst, a, address(st.src2), n, dtype_, op_);
    }
  }
  finish_step(s);
}

void Execution::post(StepId s) {
  const Step& st = schedule_->steps[s];
  Completion& c = completions_[s];
  const std::uint64_t tag = tag_base_ | st.tag;
  if (st.kind == StepKind::send)
    transport_.isend(st.peer, tag, address(st.src), st.src.count * esize_, c);
  else
    transport_.irecv(st.peer, tag, address(st.dst), st.dst.count * esize_, c);
  in_flight_.push_back(s);
}

void Execution::fail(ErrorCode code, std::string message, int peer) {
  if (failed_) return;
  failed_ = true;
  error_code_ = code;
  error_message_ = std::move(message);
  error_peer_ = peer;
  cancel();
}

bool Execution::advance() {
  if (failed_) return false;
  const std::size_t before = completed_;
  for (;;) {
    while (!ready_.empty()) {
      const StepId s = ready_.back();
      ready_.pop_back();
      const StepKind k = schedule_->steps[s].kind;
      if (k == StepKind::send || k == StepKind::recv)
        post(s);
      else
        run_local_step(s);
    }
    // Harvest completions; a completed receive may make local steps ready.
    bool any = false;
    for (std::size_t i = 0; i < in_flight_.size();) {
      const StepId s = in_flight_[i];
      Completion& c = completions_[s];
      const auto state = c.state.load(std::memory_order_acquire);
      if (state == Completion::pending) {
        ++i;
        continue;
      }
      in_flight_[i] = in_flight_.back();
      in_flight_.pop_back();
      const Step& st = schedule_->steps[s];
      if (state == Completion::failed) {
        fail(c.code, c.message, c.cause >= 0 ? c.cause : st.peer);
        return completed_ != before;
      }
      if (st.kind == StepKind::send && bytes_sent_) bytes_sent_[st.peer] += st.src.count * esize_;
      if (st.kind == StepKind::recv && c.bytes != st.dst.count * esize_) {
        fail(ErrorCode::mismatch, "rank " + std::to_string(st.peer) + " sent " + std::to_string(c.bytes) +
                                      " B, this rank expected " + std::to_string(st.dst.count * esize_) +
                                      " B (counts differ across ranks)",
             st.peer);
        return completed_ != before;
      }
      finish_step(s);
      any = true;
    }
    if (!any || ready_.empty()) break;
  }
  return completed_ != before;
}

void Execution::cancel() noexcept {
  for (StepId s : in_flight_)
    if (completions_[s].is_pending()) transport_.cancel(completions_[s]);
  in_flight_.clear();
}

std::vector<int> Execution::waiting_on() const {
  std::vector<int> peers;
  auto add = [&](StepKind kind) {
    for (StepId s : in_flight_) {
      const Step& st = schedule_->steps[s];
      if (st.kind != kind || !completions_[s].is_pending()) continue;
      if (std::find(peers.begin(), peers.end(), st.peer) == peers.end()) peers.push_back(st.peer);
    }
  };
  add(StepKind::recv);
  add(StepKind::send);
  return peers;
}

}  // namespace comm
