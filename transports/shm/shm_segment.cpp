#include "shm_segment.hpp"

#include "shm_sync.hpp"
#include "util/log.hpp"
#include "util/process.hpp"

#include <comm/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace comm::shm {
namespace {

constexpr std::uint64_t kMagic = 0x636f6d6d2d73686dULL;  // "comm-shm"
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kMinWindow = 64 * 1024;
constexpr std::size_t kMinRing = 16 * 1024;
constexpr std::size_t kMaxRing = 256 * 1024;

std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

std::size_t pow2_floor(std::size_t x) {
  std::size_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

std::string mib(std::size_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%zu B (%.1f MiB)", bytes, static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string errno_text(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

std::size_t default_window(int n) {
  if (n <= 8) return std::size_t{2} << 20;
  if (n <= 32) return std::size_t{1} << 20;
  return std::size_t{512} << 10;
}

// Free space of the filesystem holding POSIX shared memory, for error messages.
std::string dev_shm_free() {
  struct statvfs s {};
  if (::statvfs("/dev/shm", &s) != 0) return "unknown";
  return mib(static_cast<std::size_t>(s.f_bavail) * s.f_frsize);
}

}  // namespace

Layout Layout::compute(int n, std::size_t requested, const std::string& what) {
  Layout l;
  l.nranks = n;
  const auto pairs = static_cast<std::size_t>(n) * static_cast<std::size_t>(n > 1 ? n - 1 : 0);
  l.ring_bytes = pairs ? std::clamp(pow2_floor((std::size_t{8} << 20) / pairs), kMinRing, kMaxRing) : 0;
  l.control_off = round_up(sizeof(Header), kLine);
  l.pairs_off = l.control_off + static_cast<std::size_t>(n) * sizeof(RankControl);
  l.pair_stride = round_up(sizeof(RingControl) + kRendezvousSlots * sizeof(std::uint64_t), kLine) + l.ring_bytes;
  l.windows_off = round_up(l.pairs_off + pairs * l.pair_stride, kPage);
  const std::size_t per_window = static_cast<std::size_t>(n) * kSlots;
  if (requested == 0) {
    l.window_bytes = default_window(n);
  } else {
    const std::size_t least = l.windows_off + per_window * (kMinWindow + kWindowStagger);
    if (requested < least)
      throw Error(ErrorCode::invalid_config, what + " = " + std::to_string(requested) + " B is too small for " +
                                                 std::to_string(n) + " ranks: the segment needs at least " +
                                                 mib(least) + " (rings, control and two 64 KiB windows per rank)");
    l.window_bytes = ((requested - l.windows_off) / per_window - kWindowStagger) / kPage * kPage;
  }
  l.total = l.windows_off + per_window * (l.window_bytes + kWindowStagger);
  return l;
}

std::string random_segment_name() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t r = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorCode::transport_failure, "shm: getrandom failed: " + errno_text(errno));
    }
    got += static_cast<std::size_t>(r);
  }
  static const char* hex = "0123456789abcdef";
  std::string name = "/" + detail::comm_shm_prefix("shm", ::getpid());
  for (unsigned char b : bytes) {
    name += hex[b >> 4];
    name += hex[b & 15];
  }
  return name;
}

Segment::Segment(Segment&& o) noexcept { *this = std::move(o); }

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    close();
    layout_ = o.layout_;
    base_ = std::exchange(o.base_, nullptr);
    fd_ = std::exchange(o.fd_, -1);
    rank_ = o.rank_;
    name_ = std::move(o.name_);
  }
  return *this;
}

Segment::~Segment() { close(); }

void Segment::close() noexcept {
  if (base_) {
    if (rank_ >= 0) {
      control(rank_).state.store(RankState::departed, std::memory_order_release);
      // Whoever sleeps waiting for this rank must learn that it left.
      Header& h = header();
      if (h.sleepers.load(std::memory_order_seq_cst) > 0)
        for (int r = 0; r < layout_.nranks; ++r) {
          RankControl& c = control(r);
          if (r == rank_ || !c.sleeping.load(std::memory_order_acquire)) continue;
          c.doorbell.fetch_add(1, std::memory_order_acq_rel);
          futex_wake_all(c.doorbell);
        }
    }
    ::munmap(base_, layout_.total);
    base_ = nullptr;
  }
  if (fd_ >= 0) {
    ::close(fd_);  // drops the liveness lock
    fd_ = -1;
  }
}

bool Segment::alive(int rank) const noexcept {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = rank;
  fl.l_len = 1;
  if (::fcntl(fd_, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: do not declare a death
  return fl.l_type != F_UNLCK;
}

void Segment::post_obituary(int dead, int by) const noexcept {
  std::uint64_t none = 0;
  header().obituary.compare_exchange_strong(
      none, (static_cast<std::uint64_t>(by + 1) << 32) | static_cast<std::uint32_t>(dead + 1));
}

std::string Segment::obituary() const {
  const std::uint64_t obit = header().obituary.load(std::memory_order_acquire);
  if (!obit) return {};
  const int dead = static_cast<int>(obit & 0xffffffffu) - 1;
  const int by = static_cast<int>(obit >> 32) - 1;
  return "rank " + std::to_string(dead) + " died (seen by rank " + std::to_string(by) + ")";
}

std::string Segment::why_gone(int rank) const {
  if (control(rank).state.load(std::memory_order_acquire) != RankState::departed) return "died (its process is gone)";
  const std::string obit = obituary();
  return obit.empty() ? "closed its communicator" : "closed its communicator after " + obit;
}

void Segment::lock_liveness(int rank) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = rank;
  fl.l_len = 1;
  if (::fcntl(fd_, F_OFD_SETLK, &fl) != 0)
    throw Error(ErrorCode::transport_failure, "shm: rank " + std::to_string(rank) +
                                                  " cannot take its liveness lock on segment " + name_ + ": " +
                                                  errno_text(errno));
}

namespace {

// Creates the object, sizes it for real and maps it; unlinks it again on failure.
int create_object(const std::string& name, const Layout& l) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(ErrorCode::transport_failure, "shm: cannot create shared memory " + name + ": " + errno_text(errno));
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(l.total));
  if (rc != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    if (rc == ENOSPC)
      throw Error(ErrorCode::invalid_config,
                  "shm: /dev/shm has no room for this communicator's segment: it needs " + mib(l.total) + " for " +
                      std::to_string(l.nranks) + " ranks, /dev/shm has " + dev_shm_free() +
                      " free; enlarge /dev/shm (docker: --shm-size) or lower shm.size / COMM_SHM_SIZE");
    throw Error(ErrorCode::transport_failure, "shm: cannot allocate " + mib(l.total) + " for " + name + ": " +
                                                  errno_text(rc));
  }
  return fd;
}

// Populated: every page of the rings and of every rank's windows is in this
// process's page table before the first call, so a first large call (and
// calibration's few rounds) pays no minor fault per 4 KiB page it touches.
std::byte* map_object(int fd, const Layout& l, const std::string& name) {
  void* p = ::mmap(nullptr, l.total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    throw Error(ErrorCode::transport_failure, "shm: cannot map " + mib(l.total) + " of " + name + ": " +
                                                  errno_text(errno));
  return static_cast<std::byte*>(p);
}

void init_segment(std::byte* base, const Layout& l) {
  auto* h = new (base) Header();
  for (int r = 0; r < l.nranks; ++r) new (base + l.control_off + static_cast<std::size_t>(r) * sizeof(RankControl))
      RankControl();
  for (int from = 0; from < l.nranks; ++from)
    for (int to = 0; to < l.nranks; ++to)
      if (from != to) new (base + l.pair_offset(from, to)) RingControl();
  h->nranks = static_cast<std::uint32_t>(l.nranks);
  h->total = l.total;
  h->ring_bytes = l.ring_bytes;
  h->window_bytes = l.window_bytes;
  h->version = kVersion;
  h->magic.store(kMagic, std::memory_order_release);
}

void check_segment(const std::byte* base, const Layout& l, const std::string& name, int rank) {
  const auto* h = reinterpret_cast<const Header*>(base);
  if (h->magic.load(std::memory_order_acquire) != kMagic ||
      h->version != kVersion || h->nranks != static_cast<std::uint32_t>(l.nranks) || h->total != l.total ||
      h->ring_bytes != l.ring_bytes || h->window_bytes != l.window_bytes)
    throw Error(ErrorCode::invalid_config,
                "shm: rank " + std::to_string(rank) + " found segment " + name +
                    " laid out differently from what it computed (ranks disagree on shm.size / COMM_SHM_SIZE, "
                    "or run different builds of comm)");
}

}  // namespace

Segment Segment::attach(Store& store, int rank, const Layout& layout, std::chrono::milliseconds timeout) {
  Segment s;
  s.layout_ = layout;
  s.rank_ = -1;  // not attached yet: close() must not mark anything
  const std::string key = "shm/segment";
  try {
    if (rank == 0) {
      s.name_ = random_segment_name();
      s.fd_ = create_object(s.name_, layout);
      s.base_ = map_object(s.fd_, layout, s.name_);
      init_segment(s.base_, layout);
      store.set(key, s.name_);
    } else {
      s.name_ = store.get(key, timeout);
      s.fd_ = ::shm_open(s.name_.c_str(), O_RDWR | O_CLOEXEC, 0600);
      if (s.fd_ < 0)
        throw Error(ErrorCode::transport_failure,
                    "shm: rank " + std::to_string(rank) + " cannot open rank 0's segment " + s.name_ + ": " +
                        errno_text(errno) + " (do the ranks see the same /dev/shm?)");
      struct stat st {};
      if (::fstat(s.fd_, &st) != 0 || static_cast<std::size_t>(st.st_size) != layout.total)
        throw Error(ErrorCode::invalid_config, "shm: rank " + std::to_string(rank) + " expected segment " + s.name_ +
                                                   " to hold " + mib(layout.total) + " but it holds " +
                                                   mib(static_cast<std::size_t>(st.st_size)) +
                                                   " (ranks disagree on shm.size / COMM_SHM_SIZE)");
      s.base_ = map_object(s.fd_, layout, s.name_);
      check_segment(s.base_, layout, s.name_, rank);
    }
    s.lock_liveness(rank);
    RankControl& me = s.control(rank);
    me.pid = ::getpid();
    me.state.store(RankState::attached, std::memory_order_release);
    s.rank_ = rank;
    const std::uint32_t n = static_cast<std::uint32_t>(layout.nranks);
    if (s.header().attached.fetch_add(1, std::memory_order_acq_rel) + 1 == n) ::shm_unlink(s.name_.c_str());
    // Everyone must be attached before anyone reads liveness locks.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (s.header().attached.load(std::memory_order_acquire) < n) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::string missing;
        for (int r = 0; r < layout.nranks; ++r)
          if (s.control(r).state.load(std::memory_order_acquire) == RankState::absent)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        ::shm_unlink(s.name_.c_str());  // nobody else will: do not leave it behind
        throw Error(ErrorCode::timeout, "shm: rank(s) " + missing + " did not map segment " + s.name_ +
                                            " within the timeout");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  } catch (...) {
    if (rank == 0 && !s.name_.empty() && s.base_ &&
        s.header().attached.load(std::memory_order_acquire) < static_cast<std::uint32_t>(layout.nranks))
      ::shm_unlink(s.name_.c_str());
    throw;
  }
  COMM_DEBUG("shm: rank " << rank << " attached segment " << s.name_ << " (" << layout.total << " B)");
  return s;
}

}  // namespace comm::shm
