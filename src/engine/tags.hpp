#pragma once
// The wire tag layout, in one place. Transports carry kTagBits (48) bits of
// tag; the core fills them as
//
//   bits 46-47  kind: 0 the library's own collectives (consistency check,
//               split), 1 user collectives, 2 user send/recv, 3 calibration
//   bits 32-45  signature of the call (collectives only): collective, dtype,
//               op (10 bits) and root modulo 16 (4 bits), exactly
//   bits 16-31  collective sequence number, modulo 65536
//   bits  0-15  the schedule step's tag (algorithms/topology.hpp kTagLimit)
//
// Two calls that differ in collective, dtype or op therefore never exchange
// data (nor do broadcasts or reduces with roots that differ modulo 16; calls
// that differ in count nearly always differ in message sizes, which the
// executor checks exactly): their messages cannot match, so a mismatched pair
// of calls stalls instead of producing garbage, and the stalled wait is
// diagnosed (CommunicatorImpl::diagnose_stall) into an error naming both
// calls. Calls whose schedules exchange nothing (two ranks that each believe
// they are a broadcast's root) complete without data crossing between them.
// The sequence number may wrap: every transport matches messages of one
// (sender, receiver, tag) in posting order and all ranks post collectives in
// the same order, so equal tags of calls 65536 apart still pair correctly.
// Point-to-point tags are the user's 32-bit CallOptions::tag.

#include <comm/schedule.hpp>
#include <comm/transport.hpp>
#include <comm/types.hpp>

#include <cstddef>
#include <cstdint>

namespace comm::detail {

enum class TagKind : std::uint64_t { internal = 0, collective = 1, p2p = 2, calibration = 3 };

inline constexpr int kKindShift = 46;
inline constexpr int kSignatureShift = 32;
inline constexpr int kSeqShift = 16;
inline constexpr std::uint64_t kSignatureMask = (std::uint64_t{1} << 14) - 1;
inline constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << 16) - 1;
static_assert(kKindShift + 2 == kTagBits, "the tag kind occupies the top two of the transport's tag bits");
static_assert(kSeqShift == kScheduleTagBits, "the sequence number sits right above the schedule's step tags");

constexpr std::uint64_t tag_kind(TagKind k) noexcept { return static_cast<std::uint64_t>(k) << kKindShift; }

// Collective (4 bits), dtype (3 bits), op (3 bits) and root modulo 16 (4 bits).
// Ops of collectives that do not reduce, and roots of unrooted ones, are
// left out: they are not part of the call.
constexpr std::uint64_t call_signature(Collective c, DataType t, ReduceOp op, int root) noexcept {
  const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
  const bool rooted = c == Collective::broadcast || c == Collective::reduce;
  return static_cast<std::uint64_t>(c) | static_cast<std::uint64_t>(t) << 4 |
         (reduces ? static_cast<std::uint64_t>(op) : 0) << 7 |
         (rooted ? static_cast<std::uint64_t>(root) & 0xF : 0) << 10;
}

// The tag base of a collective: OR the schedule step's tag into it.
constexpr std::uint64_t collective_tag_base(TagKind kind, std::uint64_t signature, std::uint64_t seq) noexcept {
  return tag_kind(kind) | (signature & kSignatureMask) << kSignatureShift | (seq & kSeqMask) << kSeqShift;
}

constexpr std::uint64_t p2p_tag(std::uint32_t user_tag) noexcept { return tag_kind(TagKind::p2p) | user_tag; }

static_assert(std::size(kAllCollectives) <= 16 && static_cast<int>(DataType::i64) < 8 &&
                  static_cast<int>(ReduceOp::avg) < 8,
              "call_signature packs collective, dtype and op into 4 + 3 + 3 bits");

}  // namespace comm::detail
