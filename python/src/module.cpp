// comm._comm: the enums, the translation of comm::Error into comm.Error, and Config.

#include "bindings.hpp"

#include <comm/comm.h>
#include <comm/comm.hpp>

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <cmath>

namespace nb = nanobind;

namespace comm::python {
namespace {

// comm.Error, defined in Python (comm/__init__.py) and handed over at import.
// Never released: it lives as long as the interpreter.
PyObject* error_class = nullptr;

void set_error_class(nb::handle cls) {
  Py_XINCREF(cls.ptr());
  error_class = cls.ptr();
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    if (error_class == nullptr) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return;
    }
    nb::object instance = nb::handle(error_class)(e.code(), e.what());
    PyErr_SetObject(error_class, instance.ptr());
  }
}

double timeout_seconds(const Config& c) { return static_cast<double>(c.timeout.count()) / 1000.0; }

void set_timeout_seconds(Config& c, double seconds) {
  // As COMM_TIMEOUT: positive, at most a year, rounded up to whole milliseconds.
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 365.0 * 86400)
    throw Error(ErrorCode::invalid_config, "Config.timeout=" + std::to_string(seconds) +
                                               " is not valid: expected a positive number of seconds, e.g. 30 or 0.5");
  c.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
}

std::string repr(const Config& c) {
  return "Config(rank=" + std::to_string(c.rank) + ", world_size=" + std::to_string(c.world_size) + ", transport='" +
         c.transport + "', store='" + c.store + "', timeout=" + std::to_string(timeout_seconds(c)) + ")";
}

template <class E, std::size_t N>
void bind_enum(nb::module_& m, const char* name, const char* doc, const E (&values)[N]) {
  nb::enum_<E> e(m, name, doc);
  for (E v : values) e.value(std::string(to_string(v)).c_str(), v);
}

}  // namespace

void bind_values(nb::module_& m) {
  bind_enum(m, "DataType", "Element type of a buffer (numpy float16 is f16; bfloat16 is bf16).", kAllDataTypes);
  bind_enum(m, "ReduceOp", "Reduction operator; avg is the sum divided by the number of ranks.", kAllReduceOps);
  bind_enum(m, "Collective", "The operations of a communicator.", kAllCollectives);
  static constexpr ErrorCode kCodes[] = {
      ErrorCode::invalid_argument, ErrorCode::unsupported, ErrorCode::unknown_algorithm,
      ErrorCode::unknown_transport, ErrorCode::invalid_config, ErrorCode::timeout,
      ErrorCode::peer_failed, ErrorCode::aborted, ErrorCode::mismatch,
      ErrorCode::transport_failure, ErrorCode::communicator_failed, ErrorCode::store_failure,
      ErrorCode::internal};
  bind_enum(m, "ErrorCode", "What a comm.Error is about; the first five are usage errors.", kCodes);

  m.def("is_usage_error", &is_usage_error, nb::arg("code"),
        "True for the codes of bad input (reported before anything is sent).");
  m.def("parse_reduce_op", &parse_reduce_op, nb::arg("name"), "ReduceOp of a name ('sum', 'max', ...).");
  m.def("parse_dtype", &parse_dtype, nb::arg("name"), "DataType of a name ('f32', 'bfloat16', ...).");
  m.def("parse_collective", &parse_collective, nb::arg("name"), "Collective of a name ('allreduce', ...).");
  m.def("dtype_size", &dtype_size, nb::arg("dtype"), "Bytes of one element.");
  m.def("_set_error_class", &set_error_class, nb::arg("cls"));
  nb::register_exception_translator(&translate);

  nb::class_<Config>(m, "Config",
                     "A communicator's configuration. Start from Config() (defaults: rank 0 of 1, "
                     "transport chosen at creation) or Config.from_env() and assign fields; comm.Communicator(config) checks "
                     "the combination.")
      .def(nb::init<>())
      .def_static("from_env", &Config::from_env,
                  "Reads COMM_RANK, COMM_WORLD_SIZE, COMM_STORE, COMM_TRANSPORT, ... (also torchrun, Slurm "
                  "and Open MPI variables). An unparseable variable raises comm.Error naming it.")
      .def_rw("rank", &Config::rank)
      .def_rw("world_size", &Config::world_size)
      .def_rw("local_rank", &Config::local_rank)
      .def_rw("store", &Config::store, "'host:port' (TCP store hosted by rank 0), 'file:/dir', or ''.")
      .def_rw("store_token", &Config::store_token)
      .def_rw("store_bind", &Config::store_bind)
      .def_rw("transport", &Config::transport, "'local', 'ucx', 'ofi', 'gloo', 'nccl', a registered name, or '' (chosen at creation).")
      .def_prop_rw("timeout", &timeout_seconds, &set_timeout_seconds, "Per-operation timeout in seconds.")
      .def_prop_rw(
          "log_level", [](const Config& c) { return std::string(to_string(c.log_level)); },
          [](Config& c, std::string_view level) { c.log_level = parse_log_level(level); },
          "'off', 'warn', 'info', 'debug' or 'trace'.")
      .def_rw("algo_override", &Config::algo_override, "e.g. 'allreduce=direct:0-64K,ring:64K-' (like COMM_ALGO).")
      .def_rw("chunk_bytes", &Config::chunk_bytes)
      .def_rw("calibrate", &Config::calibrate)
      .def_rw("tuning_file", &Config::tuning_file)
      .def_rw("check", &Config::check)
      .def_rw("device", &Config::device)
      .def_rw("iface", &Config::iface)
      .def_rw("flight_recorder_size", &Config::flight_recorder_size)
      .def_rw("dump_dir", &Config::dump_dir)
      .def_rw("transport_options", &Config::transport_options,
              "Settings owned by transports, keyed '<transport>.<setting>' (e.g. 'ofi.provider'); "
              "assign a whole dict (reading gives a copy).")
      .def("transport_option", &Config::transport_option, nb::arg("transport"), nb::arg("setting"),
           "transport_options['<transport>.<setting>'], else COMM_<TRANSPORT>_<SETTING>, else ''.")
      .def("__repr__", &repr);
}

}  // namespace comm::python

NB_MODULE(_comm, m) {
  m.doc() = "Bindings of the comm C++ library; use the comm package, not this module.";
  int major = 0, minor = 0, patch = 0;
  comm_get_version(&major, &minor, &patch);  // the library's own version, from its C API
  m.attr("__version__") = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  comm::python::bind_values(m);
  comm::python::bind_communicator(m);
}
