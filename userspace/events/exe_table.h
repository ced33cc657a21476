#pragma once
// Who runs what: each process's executable, followed through the record's
// exec, fork and exit entries. Used wherever an entry must be tied to the
// program behind its pid (query --exec, a violation's `exe`).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flightrec::events {

class ExeTable {
 public:
  // A successful exec; no filename (not decodable): what it ran is unknown now.
  void exec(int64_t pid, const std::optional<std::string>& filename);
  // A new process (not a thread): it runs what its parent runs; a reused
  // pid never inherits what its previous owner ran.
  void fork(int64_t parent, int64_t child);
  // The last thread of a process exited: forgotten after the entry at
  // hand (it is still the process's own), at the next settle().
  void exit(int64_t pid) { exits_.push_back(pid); }
  void settle();
  const std::string* find(int64_t pid) const;
  void clear() { exe_.clear(), exits_.clear(); }

 private:
  std::map<int64_t, std::string> exe_;
  std::vector<int64_t> exits_;
};

}  // namespace flightrec::events
