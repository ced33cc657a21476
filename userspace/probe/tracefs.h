#pragma once
// Tracepoint ids, which the kernel tells only through tracefs. A fresh
// machine has not mounted it: then a private mount is made for the
// lookup and removed again, so the host's mount table is left as it was.
#include <cstdint>
#include <string>
#include <vector>

namespace flightrec::probe {

// The id of each events/<category>/<name>, or -1 where this kernel has no
// such tracepoint. Throws Error when tracefs cannot be read at all.
std::vector<int64_t> tracepoint_ids(const std::string& category, const std::vector<std::string>& names);

}  // namespace flightrec::probe
