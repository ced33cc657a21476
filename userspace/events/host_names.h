#pragma once
// The names a session's addresses were looked up by: the session's
// resolver notes each answer, decoding adds the name to the connects and
// sends to one of them ("host"). The resolver's thread writes, the
// recording thread reads. Bounded: the oldest names go first.
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace flightrec::events {

class HostNames {
 public:
  static constexpr size_t kMax = 4096;
  // `address` as inet_ntop writes it now answers to `name`.
  void note(const std::string& address, const std::string& name);
  std::optional<std::string> name_of(const std::string& address) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> names_;  // address -> the latest name
  std::deque<std::string> order_;             // addresses, oldest first
};

}  // namespace flightrec::events
