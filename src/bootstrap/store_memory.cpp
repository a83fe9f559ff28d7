// The in-memory store (threads of one process) and the prefixing view.

#include <comm/error.hpp>
#include <comm/store.hpp>

#include <condition_variable>
#include <map>
#include <mutex>

namespace comm {

Store::~Store() = default;

namespace {

std::string missing_keys(const std::vector<std::string>& keys, const std::map<std::string, std::string>& data) {
  std::string out;
  for (auto& k : keys)
    if (!data.count(k)) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard lk(mu_);
      data_[key] = value;
    }
    cv_.notify_all();
  }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    wait({key}, timeout);
    std::lock_guard lk(mu_);
    return data_.at(key);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock lk(mu_);
    auto all = [&] {
      for (auto& k : keys)
        if (!data_.count(k)) return false;
      return true;
    };
    if (!cv_.wait_for(lk, timeout, all))
      throw Error(ErrorCode::timeout, "memory store: keys " + missing_keys(keys, data_) + " not set within " +
                                          std::to_string(timeout.count()) + " ms");
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    std::int64_t v;
    {
      std::lock_guard lk(mu_);
      auto it = data_.find(key);
      v = (it == data_.end() ? 0 : std::stoll(it->second)) + delta;
      data_[key] = std::to_string(v);
    }
    cv_.notify_all();
    return v;
  }
  bool check(const std::string& key) override {
    std::lock_guard lk(mu_);
    return data_.count(key) > 0;
  }
  bool erase(const std::string& key) override {
    std::lock_guard lk(mu_);
    return data_.erase(key) > 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
};

class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix) : base_(std::move(base)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::string& value) override { base_->set(prefix_ + key, value); }
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    return base_->get(prefix_ + key, timeout);
  }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (auto& k : keys) full.push_back(prefix_ + k);
    base_->wait(full, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return base_->add(prefix_ + key, delta); }
  bool check(const std::string& key) override { return base_->check(prefix_ + key); }
  bool erase(const std::string& key) override { return base_->erase(prefix_ + key); }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store() { return std::make_shared<MemoryStore>(); }

std::shared_ptr<Store> make_prefix_store(std::shared_ptr<Store> base, std::string prefix) {
  return std::make_shared<PrefixStore>(std::move(base), std::move(prefix));
}

}  // namespace comm
