#pragma once
// Which sessions the tasks on the host hold, by one walk of /proc: what
// settles a session's task count when it stays above zero with no task of
// the session left (probe/capture.h, session_has_tasks).
#include <cstdint>
#include <optional>
#include <set>

namespace flightrec::probe {

// fr_tasks_map: the programs' task storage (keyed by pidfd). nullopt when
// some task's session could not be told: then no session is known empty.
std::optional<std::set<uint32_t>> sessions_of_host_tasks(int fr_tasks_map);

}  // namespace flightrec::probe
