#include "events/host_names.h"

namespace flightrec::events {

void HostNames::note(const std::string& address, const std::string& name) {
  std::lock_guard lock(mu_);
  auto [it, added] = names_.insert_or_assign(address, name);
  if (!added) return;
  order_.push_back(address);
  if (order_.size() > kMax) {
    names_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<std::string> HostNames::name_of(const std::string& address) const {
  std::lock_guard lock(mu_);
  auto it = names_.find(address);
  if (it == names_.end()) return std::nullopt;
  return it->second;
}

}  // namespace flightrec::events
