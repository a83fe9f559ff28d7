// libFuzzer target: the JSON reader (src/util/json) must either return a
// document or throw json::ParseError — never crash, hang or throw anything
// else — and a document it returns, written back with the writer, must parse
// to the same document (so nothing the reader accepts is lost on the way out).

#include "util/json.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void write(comm::json::Writer& w, const comm::json::Value& v) {
  using K = comm::json::Value::Kind;
  switch (v.kind) {
    case K::null: w.null(); break;
    case K::boolean: w.value(v.boolean); break;
    case K::number: w.value(v.number); break;
    case K::string: w.value(v.string); break;
    case K::array:
      w.begin_array();
      for (const auto& e : v.array) write(w, e);
      w.end_array();
      break;
    case K::object:
      w.begin_object();
      for (const auto& [k, e] : v.object) {
        w.key(k);
        write(w, e);
      }
      w.end_object();
      break;
  }
}

bool same(const comm::json::Value& a, const comm::json::Value& b) {
  if (a.kind != b.kind || a.boolean != b.boolean || a.number != b.number || a.string != b.string ||
      a.array.size() != b.array.size() || a.object.size() != b.object.size())
    return false;
  for (std::size_t i = 0; i < a.array.size(); ++i)
    if (!same(a.array[i], b.array[i])) return false;
  for (std::size_t i = 0; i < a.object.size(); ++i)
    if (a.object[i].first != b.object[i].first || !same(a.object[i].second, b.object[i].second)) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  comm::json::Value v;
  try {
    v = comm::json::parse(text, "fuzz");
  } catch (const comm::json::ParseError&) {
    return 0;
  }
  comm::json::Writer w;
  write(w, v);
  if (!same(comm::json::parse(w.str(), "round trip"), v)) std::abort();
  return 0;
}
