#pragma once
// Path rules (hidden paths, the exec allowlist) as lsm/file_open sees
// paths: the kernel reports an opened file by its resolved path, so a rule
// for /bin (a symlink to usr/bin on Debian) must also match /usr/bin.
#include <string>
#include <vector>

#include "probe/capture.h"

namespace flightrec::session {

// Appends each path as the next rule, matched as written and where its
// symlinks lead inside `root` (the file system the session sees as /). A
// path too long for the trie (FR_PATH_RULE_MAX) is left out, or its
// resolved form: returns false if any was.
bool add_path_rules(probe::PathRules& rules, const std::vector<std::string>& paths, const std::string& root);

// A path no rule covers, though a shorter rule does (the work directory
// under a hidden /home): the trie's longest match wins, and it says 0.
void add_path_exception(probe::PathRules& rules, const std::string& path, const std::string& root);

}  // namespace flightrec::session
