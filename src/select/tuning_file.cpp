#include "select/tuning_file.hpp"

#include <comm/error.hpp>
#include <comm/types.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <unistd.h>

namespace comm {
namespace {

[[noreturn]] void bad_file(const std::string& path, const std::string& problem) {
  throw Error(ErrorCode::invalid_config,
              "tuning file '" + path + "': " + problem +
                  " (fix or delete the file; COMM_CALIBRATE=1 measures the machine and writes a new one)");
}

[[noreturn]] void unwritable(const std::string& path, const std::string& problem) {
  throw Error(ErrorCode::invalid_config, "tuning file '" + path + "' cannot be written: " + problem +
                                             " (point COMM_TUNING_FILE at a writable location)");
}

// A finite number at `key` of `obj` within (min, max]; nullopt if absent.
std::optional<double> number_at(const std::string& path, const json::Value& obj, std::string_view where,
                                std::string_view key, double min_exclusive, bool allow_min = false) {
  const json::Value* v = obj.find(key);
  if (!v) return std::nullopt;
  const std::string name = std::string(where) + "." + std::string(key);
  if (v->kind != json::Value::Kind::number)
    bad_file(path, name + " must be a number, not " + std::string(json::to_string(v->kind)));
  if (v->number < min_exclusive || (!allow_min && v->number == min_exclusive)) {
    bad_file(path, name + " = " + json::number(v->number) + " is out of range (must be " +
                       (allow_min ? ">= " : "> ") + json::number(min_exclusive) + ")");
  }
  return v->number;
}

void only_keys(const std::string& path, const json::Value& obj, std::string_view where,
               std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, unused] : obj.object) {
    bool ok = false;
    std::string list;
    for (auto a : allowed) {
      ok = ok || k == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!ok) bad_file(path, "unknown key " + json::quote(k) + " in " + std::string(where) + " (expected " + list + ")");
  }
}

const json::Value& object_at(const std::string& path, const json::Value& v, std::string_view where) {
  if (v.kind != json::Value::Kind::object)
    bad_file(path, std::string(where) + " must be an object, not " + std::string(json::to_string(v.kind)));
  return v;
}

}  // namespace

namespace {

// The file's text, or nullopt if it does not exist; throws if it cannot be read.
std::optional<std::string> read_tuning_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return std::nullopt;
    bad_file(path, std::string("cannot be opened: ") + std::strerror(errno));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) bad_file(path, "read error");
  return buf.str();
}

}  // namespace

namespace {

std::string string_at(const std::string& path, const json::Value& obj, std::string_view where, std::string_view key) {
  const json::Value* v = obj.find(key);
  if (!v) return {};
  if (v->kind != json::Value::Kind::string)
    bad_file(path, std::string(where) + "." + std::string(key) + " must be a string, not " +
                       std::string(json::to_string(v->kind)));
  return v->string;
}

// A non-empty array of [bytes, microseconds] pairs of non-negative numbers at `at`.
std::vector<std::pair<std::size_t, double>> read_points(const std::string& path, const json::Value& points,
                                                        const std::string& at) {
  if (points.kind != json::Value::Kind::array || points.array.empty())
    bad_file(path, at + " must be a non-empty array of [bytes, microseconds] pairs");
  std::vector<std::pair<std::size_t, double>> pts;
  for (const auto& p : points.array) {
    if (p.kind != json::Value::Kind::array || p.array.size() != 2 || p.array[0].kind != json::Value::Kind::number ||
        p.array[1].kind != json::Value::Kind::number || p.array[0].number < 0 || p.array[1].number < 0)
      bad_file(path, at + " holds an entry that is not a [bytes, microseconds] pair of non-negative numbers");
    pts.emplace_back(static_cast<std::size_t>(p.array[0].number), p.array[1].number);
  }
  return pts;
}

// "native" or "measured": {collective: {algorithm: [[bytes, us], ...]}}.
NativeProfile read_profile(const std::string& path, const json::Value& native, const std::string& name) {
  NativeProfile profile;
  object_at(path, native, name);
  for (const auto& [coll_name, algos] : native.object) {
    Collective coll{};
    try {
      coll = parse_collective(coll_name);
    } catch (const Error& e) {
      bad_file(path, name + ": " + std::string(e.what()));
    }
    const std::string where = name + "." + coll_name;
    object_at(path, algos, where);
    for (const auto& [algo, points] : algos.object) {
      profile.set(coll, algo, read_points(path, points, where + "." + algo));
    }
  }
  return profile;
}

TuningExtras read_extras(const std::string& path, const json::Value& root) {
  TuningExtras ex;
  if (const json::Value* k = root.find("key")) {
    object_at(path, *k, "key");
    only_keys(path, *k, "key", {"id", "description"});
    ex.key_id = string_at(path, *k, "key", "id");
    ex.key_description = string_at(path, *k, "key", "description");
  }
  if (const json::Value* n = root.find("native")) ex.native = read_profile(path, *n, "native");
  if (const json::Value* m = root.find("measured")) ex.measured = read_profile(path, *m, "measured");
  return ex;
}

}  // namespace

bool load_tuning(const std::string& path, LinkMatrix& links, ComputeParams& compute, TuningExtras* extras) {
  const auto text = read_tuning_file(path);
  if (!text) return false;
  apply_tuning(*text, path, links, compute, extras);
  return true;
}

bool load_tuning_agreed(const std::string& path, Store& store, int rank, LinkMatrix& links, ComputeParams& compute,
                        std::chrono::milliseconds timeout, TuningExtras* extras) {
  const std::string key = "tuning_file/text";
  if (rank == 0) {
    std::string message;
    try {
      const auto text = read_tuning_file(path);
      message = text ? "text:" + *text : "missing:";
    } catch (const Error& e) {
      message = std::string("error:") + e.what();
    }
    store.set(key + "/origin", path);
    store.set(key, message);
  }
  const std::string message = store.get(key, timeout);
  // Errors name rank 0's file: the one whose contents every rank applies.
  const std::string origin = store.get(key + "/origin", timeout);
  if (message.starts_with("missing:")) return false;
  if (message.starts_with("error:")) throw Error(ErrorCode::invalid_config, message.substr(6));
  if (!message.starts_with("text:"))
    throw Error(ErrorCode::store_failure, "tuning file '" + origin + "': malformed value at store key '" + key + "'");
  apply_tuning(message.substr(5), origin, links, compute, extras);
  return true;
}

namespace {

json::Value parse_tuning(const std::string& text, const std::string& path) {
  try {
    return json::parse(text, "tuning file '" + path + "'");
  } catch (const json::ParseError& e) {
    throw Error(ErrorCode::invalid_config, e.what());
  }
}

void check_version(const std::string& path, const json::Value& root) {
  const auto version = number_at(path, root, "$", "comm_tuning_version", 0);
  if (!version) bad_file(path, "missing \"comm_tuning_version\" (this file was not written by comm)");
  // Version 1 lacks the rendezvous, large-data and per-operation fields; those keep their current values.
  if (*version != std::floor(*version) || *version < 1 || *version > kTuningFileVersion) {
    bad_file(path, "comm_tuning_version " + json::number(*version) +
                       " is not supported (this build reads versions 1 to " + std::to_string(kTuningFileVersion) +
                       ")");
  }
}

// One "links" entry, validated; absent fields keep the link's current value.
struct KindValues {
  LinkKind kind;
  std::optional<double> alpha, beta, threshold, extra, beta_large;
  std::optional<bool> receiver_copies;
  std::optional<std::vector<std::pair<std::size_t, double>>> transfer_curve;
};

KindValues read_link_entry(const std::string& path, const std::string& name, const json::Value& entry) {
  LinkKind kind{};
  try {
    kind = parse_link_kind(name);
  } catch (const Error& e) {
    bad_file(path, "links: " + std::string(e.what()));
  }
  const std::string where = "links." + name;
  object_at(path, entry, where);
  only_keys(path, entry, where,
            {"alpha_us", "beta_gbps", "rndv_threshold_bytes", "rndv_extra_us", "beta_large_gbps", "receiver_copies",
             "transfer_us"});
  KindValues values{kind,
                    number_at(path, entry, where, "alpha_us", 0, true),
                    number_at(path, entry, where, "beta_gbps", 0),
                    number_at(path, entry, where, "rndv_threshold_bytes", 0, true),
                    number_at(path, entry, where, "rndv_extra_us", 0, true),
                    number_at(path, entry, where, "beta_large_gbps", 0),
                    std::nullopt,
                    std::nullopt};
  if (const json::Value* rc = entry.find("receiver_copies")) {
    if (rc->kind != json::Value::Kind::boolean)
      bad_file(path, where + ".receiver_copies must be a boolean, not " + std::string(json::to_string(rc->kind)));
    values.receiver_copies = rc->boolean;
  }
  if (const json::Value* curve = entry.find("transfer_us")) {
    const std::string at = where + ".transfer_us";
    values.transfer_curve = read_points(path, *curve, at);
    const auto& points = *values.transfer_curve;
    for (std::size_t i = 0; i < points.size(); ++i)
      if (points[i].first == 0 || (i > 0 && (points[i].first <= points[i - 1].first ||
                                             points[i].second < points[i - 1].second)))
        bad_file(path, at + " must list sizes above 0 in increasing order with times that do not decrease (entry " +
                           std::to_string(i) + " does not)");
  }
  return values;
}

std::vector<KindValues> read_links(const std::string& path, const json::Value& root) {
  std::vector<KindValues> kinds;
  if (const json::Value* l = root.find("links")) {
    object_at(path, *l, "links");
    for (const auto& [name, entry] : l->object) kinds.push_back(read_link_entry(path, name, entry));
  }
  return kinds;
}

// `compute` with the file's "compute" fields applied.
ComputeParams read_compute(const std::string& path, const json::Value& root, ComputeParams c) {
  const json::Value* cv = root.find("compute");
  if (!cv) return c;
  object_at(path, *cv, "compute");
  only_keys(path, *cv, "compute",
            {"reduce_gbps", "copy_gbps", "step_overhead_us", "op_overhead_us", "cache_bytes", "reduce_large_gbps",
             "copy_large_gbps"});
  if (auto v = number_at(path, *cv, "compute", "reduce_gbps", 0)) c.reduce_gbps = *v;
  if (auto v = number_at(path, *cv, "compute", "copy_gbps", 0)) c.copy_gbps = *v;
  if (auto v = number_at(path, *cv, "compute", "step_overhead_us", 0, true)) c.step_overhead_us = *v;
  if (auto v = number_at(path, *cv, "compute", "op_overhead_us", 0, true)) c.op_overhead_us = *v;
  if (auto v = number_at(path, *cv, "compute", "cache_bytes", 0, true)) c.cache_bytes = static_cast<std::size_t>(*v);
  if (auto v = number_at(path, *cv, "compute", "reduce_large_gbps", 0)) c.reduce_large_gbps = *v;
  if (auto v = number_at(path, *cv, "compute", "copy_large_gbps", 0)) c.copy_large_gbps = *v;
  return c;
}

void apply_links(const std::vector<KindValues>& kinds, LinkMatrix& links) {
  for (const auto& k : kinds)
    for (auto& link : links.links)
      if (link.kind == k.kind) {
        if (k.alpha) link.alpha_us = *k.alpha;
        if (k.beta) link.beta_gbps = *k.beta;
        if (k.threshold) link.rndv_threshold_bytes = static_cast<std::size_t>(*k.threshold);
        if (k.extra) link.rndv_extra_us = *k.extra;
        if (k.beta_large) link.beta_large_gbps = *k.beta_large;
        if (k.receiver_copies) link.receiver_copies = *k.receiver_copies;
        if (k.transfer_curve) link.transfer_curve = *k.transfer_curve;
        // comm-info shows the link's source next to its figures.
        if (link.detail.find("tuning file") == std::string::npos)
          link.detail += (link.detail.empty() ? "" : ", ") + std::string("from tuning file");
      }
}

}  // namespace

void apply_tuning(const std::string& text, const std::string& path, LinkMatrix& links, ComputeParams& compute,
                  TuningExtras* extras) {
  const json::Value root = parse_tuning(text, path);
  object_at(path, root, "the top level");
  only_keys(path, root, "the top level", {"comm_tuning_version", "key", "links", "compute", "native", "measured"});
  check_version(path, root);
  // Validate everything before changing anything.
  const std::vector<KindValues> kinds = read_links(path, root);
  const ComputeParams c = read_compute(path, root, compute);
  TuningExtras ex = read_extras(path, root);
  apply_links(kinds, links);
  compute = c;
  if (extras) *extras = std::move(ex);
}

namespace {

// The figures of the first pair of ranks joined by a link of `kind`, or nullptr.
const LinkInfo* first_link_of(const LinkMatrix& links, LinkKind kind) {
  for (int a = 0; a < links.n; ++a)
    for (int b = 0; b < links.n; ++b)
      if (a != b && links.at(a, b).kind == kind) return &links.at(a, b);
  return nullptr;
}

// "native" or "measured": {collective: {algorithm: [[bytes, us], ...]}}
void write_profile(json::Writer& w, const NativeProfile& profile, std::string_view name) {
  w.key(name).begin_object();
  for (Collective c : kAllCollectives) {
    bool any = false;
    for (const auto& curve : profile.curves) {
      if (curve.collective != c) continue;
      if (!any) w.key(to_string(c)).begin_object();
      any = true;
      w.member(curve.algorithm, curve.points);
    }
    if (any) w.end_object();
  }
  w.end_object();
}

std::string tuning_json(const LinkMatrix& links, const ComputeParams& compute, const TuningExtras* extras) {
  // One line per link kind and for the compute figures: a file people read and edit.
  json::Writer w;
  w.set_break_depth(2);
  w.begin_object().member("comm_tuning_version", kTuningFileVersion);
  if (extras && !extras->key_id.empty())
    w.key("key").begin_object().member("id", extras->key_id).member("description", extras->key_description).end_object();
  w.key("links").begin_object();
  for (LinkKind kind : kAllLinkKinds) {
    const LinkInfo* l = kind == LinkKind::self ? nullptr : first_link_of(links, kind);
    if (!l) continue;
    w.key(to_string(kind)).begin_object().member("alpha_us", l->alpha_us).member("beta_gbps", l->beta_gbps);
    // No threshold (every message eager) is the absence of the key.
    if (l->rndv_threshold_bytes != std::numeric_limits<std::size_t>::max())
      w.member("rndv_threshold_bytes", l->rndv_threshold_bytes);
    w.member("rndv_extra_us", l->rndv_extra_us);
    if (l->beta_large_gbps > 0) w.member("beta_large_gbps", l->beta_large_gbps);
    w.member("receiver_copies", l->receiver_copies);
    if (!l->transfer_curve.empty()) w.member("transfer_us", l->transfer_curve);
    w.end_object();
  }
  w.end_object();
  w.key("compute").begin_object();
  w.member("reduce_gbps", compute.reduce_gbps).member("copy_gbps", compute.copy_gbps);
  w.member("step_overhead_us", compute.step_overhead_us).member("op_overhead_us", compute.op_overhead_us);
  w.member("cache_bytes", compute.cache_bytes);
  if (compute.reduce_large_gbps > 0) w.member("reduce_large_gbps", compute.reduce_large_gbps);
  if (compute.copy_large_gbps > 0) w.member("copy_large_gbps", compute.copy_large_gbps);
  w.end_object();
  if (extras && !extras->native.curves.empty()) write_profile(w, extras->native, "native");
  if (extras && !extras->measured.curves.empty()) write_profile(w, extras->measured, "measured");
  w.end_object();
  return w.str() + "\n";
}

}  // namespace

void save_tuning(const std::string& path, const LinkMatrix& links, const ComputeParams& compute,
                 const TuningExtras* extras) {
  const std::string text = tuning_json(links, compute, extras);
  // Rename makes the update atomic for concurrent readers (other jobs loading it).
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) unwritable(path, tmp + ": " + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      unwritable(path, "write error on " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    unwritable(path, "rename from " + tmp + ": " + why);
  }
}

}  // namespace comm
