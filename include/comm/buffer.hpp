#pragma once
/// \file buffer.hpp
/// Non-owning buffer views. A view names memory the caller owns: it must stay
/// valid (and, for outputs, untouched) until the operation that uses it has
/// completed (the blocking call returned, or Work::wait/test reported done).

#include <comm/types.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace comm {

/// Maps a C++ element type to its DataType. Specialise for your own 16-bit
/// float types (e.g. `template <> inline constexpr DataType dtype_of<__half>
/// = DataType::f16;`).
template <class T>
inline constexpr DataType dtype_of = [] {
  if constexpr (std::is_same_v<T, float>) return DataType::f32;
  else if constexpr (std::is_same_v<T, double>) return DataType::f64;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DataType::i8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DataType::u8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DataType::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DataType::i64;
  else static_assert(sizeof(T) == 0, "no comm::DataType for this type; pass a DataType explicitly");
}();

/// A read-only typed buffer: `count` elements of `dtype` at `data`.
struct ConstView {
  const void* data = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  MemoryKind memory = MemoryKind::host;

  std::size_t bytes() const noexcept { return count * dtype_size(dtype); }
};

/// A writable typed buffer. Converts implicitly to ConstView.
struct View {
  void* data = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::f32;
  MemoryKind memory = MemoryKind::host;

  std::size_t bytes() const noexcept { return count * dtype_size(dtype); }
  operator ConstView() const noexcept { return {data, count, dtype, memory}; }
};

/// view(span) builds a View of host memory from a typed span or container.
template <class T>
View view(std::span<T> s, MemoryKind m = MemoryKind::host) {
  return {s.data(), s.size(), dtype_of<std::remove_const_t<T>>, m};
}
template <class T>
ConstView view(std::span<const T> s, MemoryKind m = MemoryKind::host) {
  return {s.data(), s.size(), dtype_of<T>, m};
}
template <class C>
auto view(C& c) -> decltype(view(std::span(c))) {
  return view(std::span(c));
}

}  // namespace comm
