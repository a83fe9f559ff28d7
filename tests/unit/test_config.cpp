// Config::from_env: precedence of our variables over launcher conventions,
// parsing of every variable, and errors that name the variable and value.

#include <comm/communicator.hpp>
#include <comm/config.hpp>
#include <comm/error.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using comm::Config;
using comm::ErrorCode;

namespace {

// Every variable from_env reads; each test starts with none of them set and
// leaves the environment as it found it.
const char* const kVars[] = {
    "COMM_RANK", "COMM_WORLD_SIZE", "COMM_LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALRANKID", "COMM_STORE",
    "MASTER_ADDR", "MASTER_PORT", "COMM_STORE_TOKEN",
    "COMM_STORE_BIND", "COMM_TRANSPORT", "COMM_TIMEOUT", "COMM_LOG", "COMM_ALGO", "COMM_CHUNK",
    "COMM_CALIBRATE", "COMM_TUNING_FILE", "COMM_CALIBRATION_BUSY_LIMIT", "COMM_CHECK", "COMM_DETERMINISTIC", "COMM_DEVICE", "COMM_OFI_PROVIDER",
    "COMM_SHM_SIZE", "COMM_IFACE",
    "COMM_FLIGHT_RECORDER"};

class CleanEnv {
 public:
  CleanEnv() {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      ::unsetenv(v);
    }
  }
  ~CleanEnv() {
    for (const char* v : kVars) ::unsetenv(v);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  void set(const char* name, const char* value) { ::setenv(name, value, 1); }

 private:
  std::map<std::string, std::string> saved_;
};

// The message of the invalid_config error from_env throws, or "" if none.
std::string config_error() {
  try {
    Config::from_env();
  } catch (const comm::Error& e) {
    CHECK(e.code() == ErrorCode::invalid_config);
    CHECK(e.is_usage());
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("from_env with nothing set gives the documented defaults") {
  CleanEnv env;
  const Config c = Config::from_env();
  CHECK(c.rank == 0);
  CHECK(c.world_size == 1);
  CHECK(c.local_rank == 0);
  CHECK(c.store.empty());
  CHECK(c.transport.empty());  // chosen at creation from the peer table
  CHECK(c.timeout == 300s);
  CHECK(c.log_level == comm::LogLevel::warn);
  CHECK(c.chunk_bytes == 1024 * 1024);
  CHECK(c.calibrate);
  CHECK_FALSE(c.check);
  CHECK_FALSE(c.deterministic);
  CHECK(c.device == -1);
  CHECK(c.flight_recorder_size == 256);
}

TEST_CASE("rank variables: COMM_* > Open MPI > PMI > PMIx > torchrun > Slurm") {
  CleanEnv env;
  // Launchers from the least to the most specific; each one set on top of the
  // others must win. Slurm's come first: an allocation leaves them (here for a
  // 1-task step) in every process mpirun starts inside it.
  struct Launcher {
    const char *rank, *size, *local;
    int value;
  };
  const Launcher order[] = {{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", 0},
                            {"RANK", "WORLD_SIZE", "LOCAL_RANK", 3},
                            {"PMIX_RANK", nullptr, nullptr, 5},
                            {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", 6},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", 1},
                            {"COMM_RANK", "COMM_WORLD_SIZE", "COMM_LOCAL_RANK", 4}};
  int size = 1, local = 0;
  for (const Launcher& l : order) {
    const std::string v = std::to_string(l.value);
    INFO(l.rank);
    env.set(l.rank, v.c_str());
    if (l.size) {
      size = l.value == 0 ? 1 : l.value * 10;
      env.set(l.size, std::to_string(size).c_str());
    }
    if (l.local) {
      local = l.value;
      env.set(l.local, v.c_str());
    }
    const Config c = Config::from_env();
    CHECK(c.rank == l.value);
    CHECK(c.world_size == size);
    CHECK(c.local_rank == local);
  }

  // Precedence is per variable: a launcher may set only some of them.
  ::unsetenv("COMM_WORLD_SIZE");
  Config c = Config::from_env();
  CHECK(c.rank == 4);
  CHECK(c.world_size == 10);

  // Explicit assignment after from_env beats every variable.
  c.rank = 7;
  c.transport = "ucx";
  CHECK(c.rank == 7);
  CHECK(c.transport == "ucx");

  // An empty variable counts as unset.
  env.set("COMM_RANK", "");
  CHECK(Config::from_env().rank == 1);
}

TEST_CASE("store address: COMM_STORE > MASTER_ADDR:MASTER_PORT") {
  CleanEnv env;
  env.set("MASTER_ADDR", "node7");
  CHECK(Config::from_env().store.empty());  // no port, no address
  env.set("MASTER_PORT", "29500");
  CHECK(Config::from_env().store == "node7:29500");
  env.set("MASTER_ADDR", "fe80::1");
  CHECK(Config::from_env().store == "[fe80::1]:29500");
  env.set("COMM_STORE", "file:/shared/job");
  CHECK(Config::from_env().store == "file:/shared/job");
  ::unsetenv("COMM_STORE");
  env.set("MASTER_PORT", "http");
  const std::string msg = config_error();
  CHECK(msg.find("MASTER_PORT") != std::string::npos);
  CHECK(msg.find("http") != std::string::npos);
}

TEST_CASE("every other variable is read") {
  CleanEnv env;
  env.set("COMM_STORE_TOKEN", "tok");
  env.set("COMM_STORE_BIND", "0.0.0.0");
  env.set("COMM_TRANSPORT", "ofi");
  env.set("COMM_TIMEOUT", "2.5");
  env.set("COMM_LOG", "DEBUG");
  env.set("COMM_ALGO", "allreduce=ring");
  env.set("COMM_CHUNK", "64K");
  env.set("COMM_CALIBRATE", "0");
  env.set("COMM_TUNING_FILE", "/tmp/t.json");
  env.set("COMM_CALIBRATION_BUSY_LIMIT", "0.25");
  env.set("COMM_CHECK", "yes");
  env.set("COMM_DETERMINISTIC", "1");
  env.set("COMM_DEVICE", "3");
  env.set("COMM_OFI_PROVIDER", "tcp;ofi_rxm");
  env.set("COMM_IFACE", "10.0.0.2");
  env.set("COMM_FLIGHT_RECORDER", "0");
  const Config c = Config::from_env();
  CHECK(c.store_token == "tok");
  CHECK(c.store_bind == "0.0.0.0");
  CHECK(c.transport == "ofi");
  CHECK(c.timeout == 2500ms);
  CHECK(c.log_level == comm::LogLevel::debug);
  CHECK(c.algo_override == "allreduce=ring");
  CHECK(c.chunk_bytes == 65536);
  CHECK_FALSE(c.calibrate);
  CHECK(c.tuning_file == "/tmp/t.json");
  CHECK(c.calibration_busy_limit == 0.25);
  CHECK(c.check);
  CHECK(c.deterministic);
  CHECK(c.device == 3);
  CHECK(c.transport_option("ofi", "provider") == "tcp;ofi_rxm");
  CHECK(c.iface == "10.0.0.2");
  CHECK(c.flight_recorder_size == 0);
}

TEST_CASE("transport settings: an explicit option beats COMM_<TRANSPORT>_<SETTING>") {
  CleanEnv env;
  Config c;
  CHECK(c.transport_option("shm", "size").empty());
  CHECK(Config::transport_option_variable("shm", "spin_us") == "COMM_SHM_SPIN_US");
  env.set("COMM_SHM_SIZE", "64M");
  CHECK(c.transport_option("shm", "size") == "64M");
  c.transport_options["shm.size"] = "8M";
  CHECK(c.transport_option("shm", "size") == "8M");
  CHECK(c.transport_option("ofi", "size").empty());  // another transport's setting is its own
}

TEST_CASE("bad values throw invalid_config naming the variable and the value") {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"COMM_RANK", "abc"},          {"COMM_RANK", "-1"},          {"COMM_WORLD_SIZE", "0"},
      {"WORLD_SIZE", "2x"},          {"SLURM_PROCID", "one"},      {"OMPI_COMM_WORLD_SIZE", "9999999999"},
      {"COMM_LOCAL_RANK", "1.5"},    {"COMM_TIMEOUT", "-3"},       {"COMM_TIMEOUT", "soon"},
      {"COMM_TIMEOUT", "0"},         {"COMM_LOG", "loud"},         {"COMM_CHUNK", "12X"},
      {"COMM_CHUNK", "0"},           {"COMM_CALIBRATE", "maybe"},  {"COMM_CHECK", "2"},
      {"COMM_DEVICE", "gpu0"},       {"COMM_FLIGHT_RECORDER", "-1"}, {"COMM_TRANSPORT", "../../etc/x"},
      {"COMM_TRANSPORT", "UCX"},     {"COMM_TRANSPORT", "my-net"}, {"COMM_TRANSPORT", "ucx "},
      {"COMM_CALIBRATION_BUSY_LIMIT", "1.5"}, {"COMM_CALIBRATION_BUSY_LIMIT", "-0.1"},
      {"COMM_CALIBRATION_BUSY_LIMIT", "half"}};
  for (const auto& c : cases) {
    const char* var = c.first;  // named copies: doctest's messages capture them in lambdas
    const char* value = c.second;
    CleanEnv env;
    env.set(var, value);
    const std::string msg = config_error();
    CHECK_MESSAGE(msg.find(var) != std::string::npos, var, "=", value, ": ", msg);
    CHECK_MESSAGE(msg.find(value) != std::string::npos, var, "=", value, ": ", msg);
  }
}

TEST_CASE("a rank outside the world size names both variables") {
  CleanEnv env;
  env.set("RANK", "4");
  env.set("WORLD_SIZE", "4");
  const std::string msg = config_error();
  CHECK(msg.find("RANK=4") != std::string::npos);
  CHECK(msg.find("WORLD_SIZE=4") != std::string::npos);
}

TEST_CASE("parse_bytes") {
  CHECK(comm::parse_bytes("0", "x") == 0);
  CHECK(comm::parse_bytes("4096", "x") == 4096);
  CHECK(comm::parse_bytes("64K", "x") == 64 * 1024);
  CHECK(comm::parse_bytes("64k", "x") == 64 * 1024);
  CHECK(comm::parse_bytes("64KB", "x") == 64 * 1024);
  CHECK(comm::parse_bytes("64KiB", "x") == 64 * 1024);
  CHECK(comm::parse_bytes("1M", "x") == 1024 * 1024);
  CHECK(comm::parse_bytes("2G", "x") == std::size_t{2} << 30);
  CHECK(comm::parse_bytes("3T", "x") == std::size_t{3} << 40);
  CHECK(comm::parse_bytes("17B", "x") == 17);
  for (const char* bad : {"", "K", "12X", "-1", " 1", "1 K", "1.5M", "1KK", "99999999999999999999",
                          "20000000000000000000K"}) {
    try {
      comm::parse_bytes(bad, "THE_VAR");
      FAIL("accepted '", bad, "'");
    } catch (const comm::Error& e) {
      CHECK(e.code() == ErrorCode::invalid_config);
      CHECK(std::string(e.what()).find("THE_VAR") != std::string::npos);
    }
  }
}

TEST_CASE("log levels round-trip through their names") {
  for (auto l : {comm::LogLevel::off, comm::LogLevel::warn, comm::LogLevel::info, comm::LogLevel::debug,
                 comm::LogLevel::trace})
    CHECK(comm::parse_log_level(comm::to_string(l)) == l);
  CHECK(comm::parse_log_level("WARNING") == comm::LogLevel::warn);
  CHECK_THROWS_AS(comm::parse_log_level("verbose"), comm::Error);
}

TEST_CASE("COMM_TRANSPORT takes plain names only, and the error lists the available transports") {
  CleanEnv env;
  env.set("COMM_TRANSPORT", "../../etc/x");
  const std::string msg = config_error();
  CHECK(msg.find("COMM_TRANSPORT='../../etc/x' is not valid") != std::string::npos);
  CHECK(msg.find("lowercase letters, digits and '_'") != std::string::npos);
  CHECK(msg.find("this build has: local") != std::string::npos);
  env.set("COMM_TRANSPORT", "my_transport2");  // plain: accepted here, looked up at creation
  CHECK(Config::from_env().transport == "my_transport2");
}

TEST_CASE("store address: derived from the Slurm job step when nothing names one") {
  CleanEnv env;
  const char* const slurm[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID"};
  std::map<std::string, std::string> saved;
  for (const char* v : slurm) {
    if (const char* old = std::getenv(v)) saved[v] = old;
    ::unsetenv(v);
  }
  env.set("SLURM_PROCID", "3");
  env.set("SLURM_NTASKS", "8");
  CHECK(Config::from_env().store.empty());  // no node list, no job id: nothing to derive
  env.set("SLURM_JOB_ID", "123456");
  env.set("SLURM_NODELIST", "gpu[07-09,12],login1");
  CHECK(Config::from_env().store == "gpu07:23456");
  env.set("SLURM_STEP_NODELIST", "rack[2-3]-n[1-4]");  // the step's nodes beat the allocation's
  CHECK(Config::from_env().store == "rack2-n1:23456");
  env.set("MASTER_ADDR", "node9");
  env.set("MASTER_PORT", "29500");
  CHECK(Config::from_env().store == "node9:29500");  // an explicit address beats the derived one
  ::unsetenv("MASTER_ADDR");
  ::unsetenv("MASTER_PORT");
  env.set("SLURM_STEP_NODELIST", "node[1-2");
  CHECK(config_error().find("SLURM_STEP_NODELIST='node[1-2' is not a Slurm host list") != std::string::npos);
  env.set("SLURM_STEP_NODELIST", "plain");
  env.set("SLURM_JOB_ID", "12x");
  CHECK(config_error().find("SLURM_JOB_ID='12x'") != std::string::npos);
  for (const char* v : slurm) ::unsetenv(v);
  for (const auto& [k, v] : saved) ::setenv(k.c_str(), v.c_str(), 1);
}

TEST_CASE("store address: a multi-rank job without one says what its launcher lacks") {
  CleanEnv env;
  env.set("OMPI_COMM_WORLD_RANK", "0");
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  try {
    comm::Communicator::create(Config::from_env());
    FAIL("a 2-rank communicator without a store was created");
  } catch (const comm::Error& e) {
    CHECK(e.code() == ErrorCode::invalid_config);
    CHECK(std::string(e.what()).find("mpirun -x COMM_STORE=") != std::string::npos);
  }
}
