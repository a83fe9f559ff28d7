#include "core/link_exchange.hpp"

#include <comm/error.hpp>

#include <locale>
#include <sstream>

namespace comm::detail {

std::string serialize_links(const std::vector<LinkInfo>& row) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os.precision(17);
  for (const LinkInfo& l : row) {
    os << static_cast<int>(l.kind) << ' ' << l.alpha_us << ' ' << l.beta_gbps << ' ' << l.rndv_threshold_bytes << ' '
       << l.rndv_extra_us << ' ' << l.beta_large_gbps << ' ' << (l.receiver_copies ? 1 : 0) << ' '
       << l.transfer_curve.size();
    for (const auto& [bytes, us] : l.transfer_curve) os << ' ' << bytes << ' ' << us;
    os << ' ' << l.detail << '\n';
  }
  return os.str();
}

void parse_links(const std::string& text, int from, LinkMatrix& m) {
  std::istringstream is(text);
  is.imbue(std::locale::classic());
  for (int p = 0; p < m.n; ++p) {
    int kind = 0, receiver_copies = 0;
    std::size_t points = 0;
    LinkInfo l;
    const auto malformed = [from] {
      return Error(ErrorCode::store_failure, "link exchange: malformed link row from rank " + std::to_string(from));
    };
    if (!(is >> kind >> l.alpha_us >> l.beta_gbps >> l.rndv_threshold_bytes >> l.rndv_extra_us >> l.beta_large_gbps >>
          receiver_copies >> points))
      throw malformed();
    for (std::size_t i = 0; i < points; ++i) {
      std::size_t bytes = 0;
      double us = 0;
      if (!(is >> bytes >> us)) throw malformed();
      l.transfer_curve.emplace_back(bytes, us);
    }
    l.kind = static_cast<LinkKind>(kind);
    l.receiver_copies = receiver_copies != 0;
    std::getline(is, l.detail);
    if (!l.detail.empty() && l.detail.front() == ' ') l.detail.erase(0, 1);
    m.links[static_cast<std::size_t>(from) * m.n + p] = std::move(l);
  }
}

LinkMatrix exchange_links(const Transport& t, Store& store, std::chrono::milliseconds timeout) {
  LinkMatrix links;
  links.n = t.size();
  links.links.resize(static_cast<std::size_t>(links.n) * links.n);
  std::vector<LinkInfo> row;
  for (int p = 0; p < t.size(); ++p) row.push_back(t.link(p));
  store.set("links/" + std::to_string(t.rank()), serialize_links(row));
  for (int r = 0; r < links.n; ++r) parse_links(store.get("links/" + std::to_string(r), timeout), r, links);
  return links;
}

}  // namespace comm::detail
