#include "select/host_load.hpp"

#include "util/c_locale.hpp"
#include "util/process.hpp"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <string_view>

namespace comm {
namespace {

double to_seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// The unsigned integers of `text`, separated by spaces or commas, up to the first other character.
std::vector<std::uint64_t> numbers(std::string_view text) {
  std::vector<std::uint64_t> out;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    while (p < end && (*p == ' ' || *p == ',')) ++p;
    std::uint64_t v = 0;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc{}) break;
    out.push_back(v);
    p = next;
  }
  return out;
}

std::string cpu_ranges(const std::vector<int>& cpus) {
  std::string s;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return s;
}

struct RankUsage {
  std::string boot;
  long pid = 0;
  double cpu_s = 0;
  std::vector<int> cpus;
};

// "<boot id> <pid> <cpu seconds> <cpu,cpu,...>"
RankUsage parse_usage(const std::string& text) {
  RankUsage u;
  const auto a = text.find(' '), b = text.find(' ', a + 1), c = text.find(' ', b + 1);
  if (c == std::string::npos) return u;
  u.boot = text.substr(0, a);
  const auto pid = numbers(std::string_view(text).substr(a + 1, b - a - 1));
  u.pid = pid.empty() ? 0 : static_cast<long>(pid[0]);
  u.cpu_s = util::parse_double(text.substr(b + 1, c - b - 1)).value_or(0);
  for (std::uint64_t cpu : numbers(std::string_view(text).substr(c + 1))) u.cpus.push_back(static_cast<int>(cpu));
  return u;
}

}  // namespace

HostLoadSample sample_host_load() {
  HostLoadSample s;
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] == ' ') continue;  // per-CPU lines only
    const auto space = line.find(' ');
    const auto fields = numbers(std::string_view(line).substr(space));
    const auto cpu = numbers(std::string_view(line).substr(3, space - 3));
    if (fields.size() < 8 || cpu.size() != 1) continue;
    // user nice system idle iowait irq softirq steal (guest time is inside user)
    const std::uint64_t busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7];
    const std::uint64_t idle = fields[3] + fields[4];
    const auto c = static_cast<std::size_t>(cpu[0]);
    if (c >= s.busy.size()) s.busy.resize(c + 1), s.total.resize(c + 1);
    s.busy[c] = busy;
    s.total[c] = busy + idle;
  }
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) == 0) s.process_cpu_s = to_seconds(ru.ru_utime) + to_seconds(ru.ru_stime);
  return s;
}

double others_share(const HostLoadSample& before, const HostLoadSample& after, const std::vector<int>& cpus,
                    double own_s) {
  std::uint64_t busy = 0, total = 0;
  for (int c : cpus) {
    const auto i = static_cast<std::size_t>(c);
    if (i >= before.busy.size() || i >= after.busy.size()) continue;
    busy += after.busy[i] - std::min(after.busy[i], before.busy[i]);
    total += after.total[i] - std::min(after.total[i], before.total[i]);
  }
  if (total == 0) return 0;
  const double own_jiffies = own_s * static_cast<double>(::sysconf(_SC_CLK_TCK));
  return std::clamp((static_cast<double>(busy) - own_jiffies) / static_cast<double>(total), 0.0, 1.0);
}

OthersLoad others_load_since(const HostLoadSample& before, Store& store, int rank, int size,
                             std::chrono::milliseconds timeout) {
  const HostLoadSample now = sample_host_load();
  const std::vector<int> mine = allowed_cpus();
  const std::string boot = detail::boot_id();
  std::string usage = boot + " " + std::to_string(::getpid()) + " " +
                      util::shortest(now.process_cpu_s - before.process_cpu_s) + " ";
  for (std::size_t i = 0; i < mine.size(); ++i) usage += (i ? "," : "") + std::to_string(mine[i]);
  store.set("tuning/usage/" + std::to_string(rank), usage);

  // This rank's group: the CPUs its ranks may use and its processes' time.
  std::set<int> cpus;
  std::map<long, double> process_s;  // thread ranks of one process report the same process
  int lowest = rank;
  for (int r = 0; r < size; ++r) {
    const RankUsage u = parse_usage(r == rank ? usage : store.get("tuning/usage/" + std::to_string(r), timeout));
    if (u.boot != boot) continue;
    lowest = std::min(lowest, r);
    cpus.insert(u.cpus.begin(), u.cpus.end());
    process_s[u.pid] = std::max(process_s[u.pid], u.cpu_s);
  }
  double own_s = 0;
  for (const auto& [pid, s] : process_s) own_s += s;
  const std::vector<int> group(cpus.begin(), cpus.end());
  const double share = others_share(before, now, group, own_s);
  store.set("tuning/busy/" + std::to_string(rank),
            util::shortest(share) + " CPUs " + cpu_ranges(group) + " of rank " + std::to_string(lowest) + "'s host");

  OthersLoad out;
  for (int r = 0; r < size; ++r) {
    const std::string text = store.get("tuning/busy/" + std::to_string(r), timeout);
    const auto space = text.find(' ');
    const double s = util::parse_double(text.substr(0, space)).value_or(0);
    if (r == 0 || s > out.share) out = {s, text.substr(space + 1)};
  }
  return out;
}

}  // namespace comm
