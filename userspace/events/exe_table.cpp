#include "events/exe_table.h"

namespace flightrec::events {

void ExeTable::exec(int64_t pid, const std::optional<std::string>& filename) {
  if (filename) exe_[pid] = *filename;
  else exe_.erase(pid);
}

void ExeTable::fork(int64_t parent, int64_t child) {
  auto it = exe_.find(parent);
  if (it != exe_.end()) exe_[child] = it->second;
  else exe_.erase(child);
}

void ExeTable::settle() {
  for (int64_t gone : exits_) exe_.erase(gone);
  exits_.clear();
}

const std::string* ExeTable::find(int64_t pid) const {
  auto it = exe_.find(pid);
  return it == exe_.end() ? nullptr : &it->second;
}

}  // namespace flightrec::events
