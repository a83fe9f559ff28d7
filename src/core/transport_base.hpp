#pragma once
// What the built-in transports all hold and declare, written once: their name,
// the rank and world size TransportInit gave them, no copies, their argument
// checks, and the set of Transport overrides each implements in its own .cpp.
// Header-only: the NCCL plugin links libcomm, which exports none of this.

#include <comm/error.hpp>
#include <comm/transport.hpp>

#include "util/non_copyable.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace comm {

/// A tag as the transports print it in messages ("0x2a").
inline std::string tag_text(std::uint64_t tag) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(tag));
  return buf;
}

/// A transport whose rank and size are TransportInit's and whose name is a
/// string literal. Not copyable (it owns connections); movable by nobody.
class TransportBase : public Transport, NonCopyable {
 public:
  std::string_view name() const noexcept final { return name_; }
  int rank() const noexcept final { return rank_; }
  int size() const noexcept final { return size_; }

 protected:
  /// Throws invalid_argument "<name> <op>: peer N is outside [0, size)" unless 0 <= peer < size.
  void check_peer(std::string_view op, int peer) const {
    if (peer < 0 || peer >= size_)
      throw Error(ErrorCode::invalid_argument, std::string(name_) + " " + std::string(op) + ": peer " +
                                                   std::to_string(peer) + " is outside [0, " +
                                                   std::to_string(size_) + ")");
  }
  /// Throws invalid_argument "<name> <op>: ..." for a peer outside [0, size),
  /// a tag wider than kTagBits, or a null buffer of more than 0 bytes.
  void check_p2p_args(std::string_view op, int peer, std::uint64_t tag, const void* data, std::size_t bytes) const {
    check_peer(op, peer);
    const std::string what = std::string(name_) + " " + std::string(op);
    if (tag >> kTagBits)
      throw Error(ErrorCode::invalid_argument,
                  what + ": tag " + tag_text(tag) + " uses more than " + std::to_string(kTagBits) + " bits");
    if (bytes > 0 && data == nullptr)
      throw Error(ErrorCode::invalid_argument, what + ": null buffer for " + std::to_string(bytes) + " B");
  }

  /// `name` must outlive the transport (a string literal).
  TransportBase(std::string_view name, const TransportInit& init) noexcept
      : rank_(init.rank), size_(init.size), name_(name) {}
  ~TransportBase() override = default;

  const int rank_;
  const int size_;

 private:
  std::string_view name_;
};

/// A TransportBase that also offers its own collectives: Native (a
/// NativeCollectivesOf<Derived>) is held here and runs on the derived transport.
template <class Derived, class Native>
class NativeTransportBase : public TransportBase {
 public:
  NativeCollectives* native() noexcept final { return &native_; }

 protected:
  /// `self` is the transport being constructed; Native only keeps the reference.
  NativeTransportBase(std::string_view name, const TransportInit& init, Derived& self) noexcept
      : TransportBase(name, init), native_(self) {}

  Native native_;
};

}  // namespace comm

/// Declares, inside a class derived from comm::TransportBase, the overrides of
/// progress, completion and cancellation that every transport defines.
#define COMM_TRANSPORT_PROGRESS_OVERRIDES                                  \
  TransportCaps caps() const noexcept override;                            \
  LinkInfo link(int peer) const override;                                  \
  bool progress() override;                                                \
  void wait(std::chrono::steady_clock::time_point deadline) override;      \
  void interrupt() noexcept override;                                      \
  void cancel(Completion& c) noexcept override

/// COMM_TRANSPORT_PROGRESS_OVERRIDES plus the host point-to-point pair, for a
/// transport the host executor runs schedules over.
#define COMM_TRANSPORT_POINT_TO_POINT_OVERRIDES                                                       \
  void isend(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Completion& c) override; \
  void irecv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Completion& c) override;       \
  COMM_TRANSPORT_PROGRESS_OVERRIDES

namespace comm {

/// The native collectives of transport T: they run on the transport they hold.
template <class T>
class NativeCollectivesOf : public NativeCollectives {
 public:
  explicit NativeCollectivesOf(T& t) noexcept : t_(t) {}

 protected:
  T& t_;
};

}  // namespace comm

namespace comm {

/// For NativeCollectives::supports: stores `reason` in *why (when why is not null) and returns false.
inline bool refuse(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return false;
}

}  // namespace comm

/// Declares, inside a class derived from comm::NativeCollectivesOf, the
/// NativeCollectives overrides it defines.
#define COMM_NATIVE_COLLECTIVES_OVERRIDES                                                                 \
  std::vector<std::string> algorithms(Collective c) const override;                                       \
  bool supports(const CollectiveArgs& args, std::string_view algorithm, std::string* why) const override; \
  double predict_us(Collective c, std::string_view algorithm, std::size_t bytes) const override;          \
  void run(const CollectiveArgs& args, std::string_view algorithm) override
