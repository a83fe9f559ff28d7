#pragma once
// The mpi transport's wire protocol, shared by mpi_transport.cpp (posting,
// lifetime) and mpi_protocol.cpp (control messages, matching, progress).

#include "mpi_transport.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace comm::mpi_detail {

constexpr int kControlTag = 0;
constexpr std::size_t kInline = 8192;  // payload bytes carried inside a control message
constexpr std::size_t kRingSlots = 32;
constexpr std::size_t kSlotBytes = sizeof(MpiTransport::Header) + kInline;
constexpr std::size_t kSpareBuffers = 64;

// Header kinds; the high half is a marker so that garbage is recognised.
constexpr std::uint32_t kMarker = 0x4d500000u;
constexpr std::uint32_t kEager = kMarker | 1, kRts = kMarker | 2, kCts = kMarker | 3, kCtsRefused = kMarker | 4;

inline std::size_t part_bytes(std::size_t bytes, std::uint32_t parts) { return (bytes + parts - 1) / parts; }


/// One isend/irecv that did not complete when posted.
struct MpiTransport::Op {
  Completion* c = nullptr;
  bool is_send = false;
  int peer = -1;
  std::uint64_t tag = 0;
  std::byte* data = nullptr;
  std::size_t bytes = 0;     ///< send: message size; recv: capacity
  std::uint64_t id = 0;      ///< large messages: the sender's number of this message
  bool matched = false;      ///< recv: a message was assigned to it
  std::size_t received = 0;  ///< recv: bytes of that message
  std::uint32_t parts = 1;   ///< large messages: payload messages (the sender decides)
  int parts_left = 0;        ///< payload requests still outstanding
};

/// A message whose header arrived before its receive was posted.
struct MpiTransport::Unexpected {
  Header h;
  std::vector<std::byte> payload;  ///< eager only
};

/// What an entry of requests_ is for.
struct MpiTransport::Pending {
  Op* op = nullptr;               ///< payload part of this operation (null: cancelled, or a control send)
  std::vector<std::byte> buffer;  ///< control send: the message, ours until MPI is done with it
};

}  // namespace comm::mpi_detail
