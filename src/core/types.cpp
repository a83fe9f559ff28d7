#include <comm/error.hpp>
#include <comm/types.hpp>

#include "util/c_locale.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace comm {

bool is_floating(DataType t) noexcept {
  switch (t) {
    case DataType::f32:
    case DataType::f64:
    case DataType::f16:
    case DataType::bf16: return true;
    case DataType::i8:
    case DataType::u8:
    case DataType::i32:
    case DataType::i64: return false;
  }
  return false;
}

std::string_view to_string(DataType t) noexcept {
  switch (t) {
    case DataType::f32: return "f32";
    case DataType::f64: return "f64";
    case DataType::f16: return "f16";
    case DataType::bf16: return "bf16";
    case DataType::i8: return "i8";
    case DataType::u8: return "u8";
    case DataType::i32: return "i32";
    case DataType::i64: return "i64";
  }
  return "?";
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "prod";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "?";
}

std::string_view to_string(MemoryKind m) noexcept {
  switch (m) {
    case MemoryKind::host: return "host";
    case MemoryKind::cuda: return "cuda";
  }
  return "?";
}

std::string_view to_string(Collective c) noexcept {
  switch (c) {
    case Collective::allreduce: return "allreduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::allgather: return "allgather";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::all_to_allv: return "all_to_allv";
    case Collective::barrier: return "barrier";
    case Collective::send: return "send";
    case Collective::recv: return "recv";
  }
  return "?";
}

std::string_view to_string(LinkKind k) noexcept {
  switch (k) {
    case LinkKind::self: return "self";
    case LinkKind::shm: return "shm";
    case LinkKind::pcie: return "pcie";
    case LinkKind::nvlink: return "nvlink";
    case LinkKind::nvswitch: return "nvswitch";
    case LinkKind::tcp: return "tcp";
    case LinkKind::ib: return "ib";
  }
  return "?";
}

namespace {

template <class E, std::size_t N>
E parse_enum(std::string_view name, const E (&all)[N], std::string_view what) {
  const std::string l = util::ascii_lower(name);
  std::string valid;
  for (E e : all) {
    if (to_string(e) == l) return e;
    if (!valid.empty()) valid += ", ";
    valid += to_string(e);
  }
  throw Error(ErrorCode::invalid_argument,
              "unknown " + std::string(what) + " '" + std::string(name) + "' (valid: " + valid + ")");
}

}  // namespace

DataType parse_dtype(std::string_view name) {
  const std::string l = util::ascii_lower(name);
  if (l == "float" || l == "float32") return DataType::f32;
  if (l == "double" || l == "float64") return DataType::f64;
  if (l == "half" || l == "float16") return DataType::f16;
  if (l == "bfloat16") return DataType::bf16;
  if (l == "int" || l == "int32") return DataType::i32;
  if (l == "int64") return DataType::i64;
  if (l == "int8") return DataType::i8;
  if (l == "uint8") return DataType::u8;
  return parse_enum(name, kAllDataTypes, "data type");
}

ReduceOp parse_reduce_op(std::string_view name) { return parse_enum(name, kAllReduceOps, "reduce op"); }

Collective parse_collective(std::string_view name) {
  const std::string l = util::ascii_lower(name);
  if (l == "alltoall") return Collective::all_to_all;
  if (l == "alltoallv") return Collective::all_to_allv;
  if (l == "reducescatter") return Collective::reduce_scatter;
  return parse_enum(name, kAllCollectives, "collective");
}

LinkKind parse_link_kind(std::string_view name) { return parse_enum(name, kAllLinkKinds, "link kind"); }

}  // namespace comm
