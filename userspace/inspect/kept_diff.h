#pragma once
// One kept change (policy work_dir_mode: overlay) shown against the host's
// file: a header line, then a unified diff (diff -u) of text, or a line
// for a binary file, a symlink's target, or why there is nothing to show.
// Every line is escaped (printable): the agent wrote these bytes.
#include <string>

#include "sandbox/changes.h"
#include "sandbox/layer.h"

namespace flightrec::inspect {

// c.path is under work_dir; host is the work directory, kept the kept
// copy's files. At most max_bytes of diff are shown (then a line says so).
std::string kept_change_text(const sandbox::FileChange& c, const std::string& work_dir, const sandbox::Layer& host,
                             const sandbox::Layer& kept, size_t max_bytes = size_t(1) << 40);

}  // namespace flightrec::inspect
