// comm._comm: Communicator and Work over any array with the buffer protocol or
// DLPack (numpy, torch, cupy, ...), without copies: comm reads and writes the
// caller's memory. The GIL is released while comm starts or waits.

#include "bindings.hpp"

#include <comm/comm.hpp>

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>

namespace nb = nanobind;

namespace comm::python {
namespace {

// DLPack device types (dlpack.h): CPU, CUDA, pinned host, managed.
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

std::string python_type(nb::handle obj) { return nb::cast<std::string>(nb::type_name(obj.type())); }

std::string describe(nb::dlpack::dtype t) {
  static const char* const kinds[] = {"int", "uint", "float", "?", "bfloat", "complex", "bool"};
  const std::string kind = t.code < 7 ? kinds[t.code] : "code " + std::to_string(t.code);
  return kind + std::to_string(t.bits) + (t.lanes == 1 ? "" : "x" + std::to_string(t.lanes));
}

DataType dtype_of(nb::dlpack::dtype t, const char* name) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return DataType::f32;
    if (code == Code::Float && t.bits == 64) return DataType::f64;
    if (code == Code::Float && t.bits == 16) return DataType::f16;
    if (code == Code::Bfloat && t.bits == 16) return DataType::bf16;
    if (code == Code::Int && t.bits == 8) return DataType::i8;
    if (code == Code::UInt && t.bits == 8) return DataType::u8;
    if (code == Code::Int && t.bits == 32) return DataType::i32;
    if (code == Code::Int && t.bits == 64) return DataType::i64;
  }
  throw Error(ErrorCode::unsupported, std::string(name) + " has elements of type " + describe(t) +
                                          ", which comm does not support: use float32, float64, float16, "
                                          "bfloat16, int8, uint8, int32 or int64");
}

// One array as comm sees it: contiguous memory of `count` elements.
template <class Array>
View view_of(const Array& a, const char* name, std::optional<DataType> as) {
  std::int64_t expected = 1;
  for (std::size_t i = a.size() == 0 ? 0 : a.ndim(); i-- > 0;) {  // an empty array has no layout
    if (a.shape(i) != 1 && a.stride(i) != expected)
      throw Error(ErrorCode::invalid_argument,
                  std::string(name) + " is not C-contiguous: comm reads and writes the array's memory in place; "
                                      "pass a contiguous array (numpy.ascontiguousarray, torch .contiguous())");
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
  View v;
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  v.count = a.size();
  // An explicit dtype reinterprets elements of its size (numpy's bfloat16 arrives as uint16).
  if (!as) {
    v.dtype = dtype_of(a.dtype(), name);
  } else {
    if (dtype_size(*as) != a.itemsize())
      throw Error(ErrorCode::invalid_argument, std::string(name) + ": dtype " + std::string(to_string(*as)) +
                                                   " needs " + std::to_string(dtype_size(*as)) +
                                                   "-byte elements, but the array's are " +
                                                   std::to_string(a.itemsize()) + " bytes");
    v.dtype = *as;
  }
  switch (a.device_type()) {
    case kDLCPU:
    case kDLCUDAHost: v.memory = MemoryKind::host; break;
    case kDLCUDA:
    case kDLCUDAManaged: v.memory = MemoryKind::cuda; break;
    default:
      throw Error(ErrorCode::unsupported, std::string(name) + " lives on DLPack device type " +
                                              std::to_string(a.device_type()) +
                                              ": comm handles host (CPU) and CUDA memory");
  }
  return v;
}

[[noreturn]] void not_an_array(nb::handle obj, const char* name) {
  throw Error(ErrorCode::invalid_argument,
              std::string(name) + " must support the buffer protocol or DLPack (numpy.ndarray, torch.Tensor, ...), "
                                  "not " + python_type(obj));
}

// `obj` as an input (read-only arrays welcome) or an output (must be writable).
// Never converts or copies: a copy would not be the caller's memory.
View import_array(nb::handle obj, const char* name, bool writable, std::optional<DataType> as) {
  nb::ndarray<nb::ro> ro;
  if (writable) {
    nb::ndarray<> rw;
    if (nb::try_cast(obj, rw, false)) return view_of(rw, name, as);
    if (nb::try_cast(obj, ro, false))
      throw Error(ErrorCode::invalid_argument,
                  std::string(name) + " is read-only: comm writes the result into it; pass a writable array");
    not_an_array(obj, name);
  }
  if (!nb::try_cast(obj, ro, false)) not_an_array(obj, name);
  return view_of(ro, name, as);
}

// Per-call options as Python passes them: algorithm name ("" = automatic),
// timeout in seconds (0 = the config's), tag, CUDA stream handle (0 = none).
struct PyCall {
  std::string algorithm;
  CallOptions options;
};

PyCall call_options(std::string algorithm, double timeout, std::uint32_t tag, std::uintptr_t stream) {
  if (!(timeout >= 0) || timeout > 365.0 * 86400)
    throw Error(ErrorCode::invalid_argument, "timeout=" + std::to_string(timeout) +
                                                 " is not valid: expected seconds >= 0 (0: the config's timeout)");
  PyCall c{std::move(algorithm), {}};
  c.options.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(timeout * 1000.0)));
  c.options.tag = tag;
  c.options.stream = reinterpret_cast<void*>(stream);
  return c;
}

using Dtype = std::optional<DataType>;

// Keyword arguments every call takes.
#define COMM_PY_CALL_ARGS                                                                         \
  nb::kw_only(), nb::arg("algorithm") = "", nb::arg("timeout") = 0.0, nb::arg("tag") = 0u,         \
      nb::arg("stream") = std::uintptr_t{0}, nb::arg("dtype") = nb::none()

// Starts an operation with the GIL released (the arrays were converted with it held).
Work run(const PyCall& pc, const std::function<Work(const CallOptions&)>& body) {
  CallOptions o = pc.options;
  o.algorithm = pc.algorithm;
  nb::gil_scoped_release release;
  return body(o);
}

void bind_work(nb::module_& m) {
  nb::class_<Work>(m, "Work", "A started operation; the comm package wraps it with the buffers it uses.")
      .def(
          "test",
          [](Work& w) {
            nb::gil_scoped_release release;
            return w.test();
          },
          "Advances the communicator; True once complete. Raises the operation's comm.Error if it failed.")
      .def(
          "wait",
          [](Work& w) {
            nb::gil_scoped_release release;
            w.wait();
          },
          "Waits until complete, up to the operation's timeout.")
      .def(
          "wait_for",
          [](Work& w, double seconds) {
            if (!(seconds >= 0))
              throw Error(ErrorCode::invalid_argument, "timeout=" + std::to_string(seconds) + " must be >= 0 seconds");
            nb::gil_scoped_release release;
            return w.wait_for(std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0))));
          },
          nb::arg("seconds"), "Waits at most `seconds`; False if still running (it keeps going).")
      .def_prop_ro("algorithm", [](const Work& w) { return std::string(w.algorithm()); });
}

}  // namespace

void bind_communicator(nb::module_& m) {
  bind_work(m);
  using V = nb::handle;
  nb::class_<Communicator> cls(m, "Communicator", "comm::Communicator; the comm package wraps it.");
  cls.def_static(
         "create",
         [](const Config& config) {
           nb::gil_scoped_release release;
           return Communicator::create(config);
         },
         nb::arg("config"))
      .def_prop_ro("valid", &Communicator::valid)
      .def_prop_ro("rank", &Communicator::rank)
      .def_prop_ro("size", &Communicator::size)
      .def_prop_ro("failed", &Communicator::failed)
      .def_prop_ro("config", &Communicator::config)
      .def_prop_ro("transport", [](const Communicator& c) { return std::string(c.transport_name()); })
      .def("close", [](Communicator& c) {
        nb::gil_scoped_release release;
        c = Communicator();
      })
      .def("abort", [](Communicator& c) {
        nb::gil_scoped_release release;
        c.abort();
      })
      .def(
          "split",
          [](Communicator& c, int color, int key) -> std::optional<Communicator> {
            nb::gil_scoped_release release;
            Communicator sub = c.split(color, key);
            if (!sub.valid()) return std::nullopt;
            return sub;
          },
          nb::arg("color"), nb::arg("key"))
      .def("algorithm_for", &Communicator::algorithm_for, nb::arg("collective"), nb::arg("nbytes"))
      .def("algorithms", &Communicator::algorithms, nb::arg("collective"))
      .def("flight_recorder_json", &Communicator::flight_recorder_json);

  cls.def(
      "iallreduce",
      [](Communicator& c, V in, V out, ReduceOp op, std::string algo, double timeout, std::uint32_t tag,
         std::uintptr_t stream, Dtype dt) {
        const View i = import_array(in, "x", false, dt), o = import_array(out, "out", true, dt);
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.iallreduce(i, o, op, opts); });
      },
      nb::arg("input"), nb::arg("out"), nb::arg("op"), COMM_PY_CALL_ARGS);
  cls.def(
      "ireduce_scatter",
      [](Communicator& c, V in, V out, ReduceOp op, std::string algo, double timeout, std::uint32_t tag,
         std::uintptr_t stream, Dtype dt) {
        const View i = import_array(in, "x", false, dt), o = import_array(out, "out", true, dt);
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.ireduce_scatter(i, o, op, opts); });
      },
      nb::arg("input"), nb::arg("out"), nb::arg("op"), COMM_PY_CALL_ARGS);
  cls.def(
      "iallgather",
      [](Communicator& c, V in, V out, std::string algo, double timeout, std::uint32_t tag, std::uintptr_t stream,
         Dtype dt) {
        const View i = import_array(in, "x", false, dt), o = import_array(out, "out", true, dt);
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.iallgather(i, o, opts); });
      },
      nb::arg("input"), nb::arg("out"), COMM_PY_CALL_ARGS);
  cls.def(
      "ibroadcast",
      [](Communicator& c, V buf, int root, std::string algo, double timeout, std::uint32_t tag,
         std::uintptr_t stream, Dtype dt) {
        const View b = import_array(buf, "x", true, dt);
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.ibroadcast(b, root, opts); });
      },
      nb::arg("buffer"), nb::arg("root"), COMM_PY_CALL_ARGS);
  cls.def(
      "ireduce",
      [](Communicator& c, V in, std::optional<V> out, ReduceOp op, int root, std::string algo, double timeout,
         std::uint32_t tag, std::uintptr_t stream, Dtype dt) {
        const View i = import_array(in, "x", false, dt);
        const View o = out ? import_array(*out, "out", true, dt) : View{nullptr, 0, i.dtype, i.memory};
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.ireduce(i, o, op, root, opts); });
      },
      nb::arg("input"), nb::arg("out").none(), nb::arg("op"), nb::arg("root"), COMM_PY_CALL_ARGS);
  cls.def(
      "iall_to_all",
      [](Communicator& c, V in, V out, std::string algo, double timeout, std::uint32_t tag, std::uintptr_t stream,
         Dtype dt) {
        const View i = import_array(in, "x", false, dt), o = import_array(out, "out", true, dt);
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.iall_to_all(i, o, opts); });
      },
      nb::arg("input"), nb::arg("out"), COMM_PY_CALL_ARGS);
  cls.def(
      "iall_to_allv",
      [](Communicator& c, V in, std::vector<std::size_t> send_counts, std::vector<std::size_t> send_displs, V out,
         std::vector<std::size_t> recv_counts, std::vector<std::size_t> recv_displs, std::string algo,
         double timeout, std::uint32_t tag, std::uintptr_t stream, Dtype dt) {
        const View i = import_array(in, "x", false, dt), o = import_array(out, "out", true, dt);
        return run(call_options(algo, timeout, tag, stream), [&](const CallOptions& opts) {
          return c.iall_to_allv(i, send_counts, send_displs, o, recv_counts, recv_displs, opts);
        });
      },
      nb::arg("input"), nb::arg("send_counts"), nb::arg("send_displs"), nb::arg("out"), nb::arg("recv_counts"),
      nb::arg("recv_displs"), COMM_PY_CALL_ARGS);
  cls.def(
      "isend",
      [](Communicator& c, V buf, int peer, std::string algo, double timeout, std::uint32_t tag,
         std::uintptr_t stream, Dtype dt) {
        const View b = import_array(buf, "x", false, dt);
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.isend(b, peer, opts); });
      },
      nb::arg("buffer"), nb::arg("peer"), COMM_PY_CALL_ARGS);
  cls.def(
      "irecv",
      [](Communicator& c, V buf, int peer, std::string algo, double timeout, std::uint32_t tag,
         std::uintptr_t stream, Dtype dt) {
        const View b = import_array(buf, "x", true, dt);
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.irecv(b, peer, opts); });
      },
      nb::arg("buffer"), nb::arg("peer"), COMM_PY_CALL_ARGS);
  cls.def(
      "ibarrier",
      [](Communicator& c, std::string algo, double timeout, std::uint32_t tag, std::uintptr_t stream, Dtype) {
        return run(call_options(algo, timeout, tag, stream),
                   [&](const CallOptions& opts) { return c.ibarrier(opts); });
      },
      COMM_PY_CALL_ARGS);
}

}  // namespace comm::python
