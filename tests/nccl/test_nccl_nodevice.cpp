// Runs where there is NO CUDA device (CI): the core finds the NCCL plugin
// beside libcomm, and asking for "nccl" then fails with a clear usage error
// naming the missing device instead of crashing or hanging. With a device it
// prints why it does not apply and exits 77 (ctest: SKIPPED).

#include "gpu_test_util.hpp"

#include <comm/comm.hpp>

#include <algorithm>
#include <cstdio>

using namespace comm;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  failures += ok ? 0 : 1;
}

}  // namespace

int main() {
  std::string why;
  if (test::cuda_devices(why) > 0) {
    std::printf("SKIPPED: a CUDA device is present; this test checks the error raised without one\n");
    return test::kSkip;
  }
  const std::string reason = transport_unavailable_reason("nccl");
  expect(reason.empty(), "the plugin libcomm_nccl.so loads and registers 'nccl' (reason: \"" + reason + "\")");
  const auto names = available_transports();
  expect(std::find(names.begin(), names.end(), "nccl") != names.end(), "available_transports() lists nccl");

  Config cfg;
  cfg.transport = "nccl";
  try {
    Communicator comm = Communicator::create(cfg);
    expect(false, "creating an nccl communicator without a GPU must throw");
  } catch (const Error& e) {
    const std::string msg = e.what();
    expect(e.code() == ErrorCode::unsupported,
           "error code is unsupported (got " + std::string(to_string(e.code())) + ")");
    expect(msg.find("no CUDA device") != std::string::npos, "message names the missing device: " + msg);
  }
  return failures ? 1 : 0;
}
