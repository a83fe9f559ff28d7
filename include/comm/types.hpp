#pragma once
/// \file types.hpp
/// Value types shared by the whole API: element types, reduction operators,
/// memory kinds, collective kinds and link kinds. Every enum has an exhaustive
/// `to_string` and a `parse_*` that throws comm::Error on an unknown name.

#include <comm/export.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace comm {

/// Element type of a buffer. f16 and bf16 are stored as 16-bit patterns; the
/// reduction kernels accumulate them in f32 and round once per reduction step.
enum class DataType : std::uint8_t { f32, f64, f16, bf16, i8, u8, i32, i64 };

/// Reduction operator. `avg` is sum divided by the number of ranks; on integer
/// types the division truncates toward zero (like C++ integer division) and the
/// sum wraps exactly as a `sum` reduction of that type would.
enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };

/// Where a buffer lives. Host transports accept only `host`; the NCCL
/// transport accepts only `cuda` (device memory).
enum class MemoryKind : std::uint8_t { host, cuda };

/// The operations a communicator offers. Used in schedules, selection tables,
/// override strings, error messages and the flight recorder.
enum class Collective : std::uint8_t {
  allreduce,
  reduce_scatter,
  allgather,
  broadcast,
  reduce,
  all_to_all,
  all_to_allv,
  barrier,
  send,
  recv,
};

/// Physical kind of the link between two ranks, as reported by the transport.
enum class LinkKind : std::uint8_t { self, shm, pcie, nvlink, nvswitch, tcp, ib };

/// Number of bytes of one element of `t`. Inline: every call's validation
/// and byte count asks it, several times per collective.
constexpr std::size_t dtype_size(DataType t) noexcept {
  switch (t) {
    case DataType::f64:
    case DataType::i64: return 8;
    case DataType::f32:
    case DataType::i32: return 4;
    case DataType::f16:
    case DataType::bf16: return 2;
    case DataType::i8:
    case DataType::u8: return 1;
  }
  return 1;
}
/// True for f32, f64, f16, bf16.
COMM_API bool is_floating(DataType t) noexcept;

COMM_API std::string_view to_string(DataType t) noexcept;
COMM_API std::string_view to_string(ReduceOp op) noexcept;
COMM_API std::string_view to_string(MemoryKind m) noexcept;
COMM_API std::string_view to_string(Collective c) noexcept;
COMM_API std::string_view to_string(LinkKind k) noexcept;

/// Parse the names printed by to_string (also accepts "float"/"half"/
/// "bfloat16"/"int"/... aliases for data types). Throws comm::Error
/// (ErrorCode::invalid_argument) naming the bad input and the valid names.
COMM_API DataType parse_dtype(std::string_view name);
COMM_API ReduceOp parse_reduce_op(std::string_view name);
/// Accepts the to_string names plus "alltoall" and "alltoallv".
COMM_API Collective parse_collective(std::string_view name);
COMM_API LinkKind parse_link_kind(std::string_view name);

/// All values of each enum, for loops in tests and tools.
inline constexpr DataType kAllDataTypes[] = {DataType::f32, DataType::f64, DataType::f16,
                                             DataType::bf16, DataType::i8,  DataType::u8,
                                             DataType::i32, DataType::i64};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min,
                                             ReduceOp::max, ReduceOp::avg};
inline constexpr Collective kAllCollectives[] = {
    Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
    Collective::broadcast, Collective::reduce,         Collective::all_to_all,
    Collective::all_to_allv, Collective::barrier,      Collective::send,
    Collective::recv};
inline constexpr LinkKind kAllLinkKinds[] = {LinkKind::self, LinkKind::shm,      LinkKind::pcie,
                                             LinkKind::nvlink, LinkKind::nvswitch, LinkKind::tcp,
                                             LinkKind::ib};

}  // namespace comm
