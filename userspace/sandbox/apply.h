#pragma once
// Applying what a session changed in its work directory to the host's
// work directory: each change only where the host still holds what the
// session started from (the record's before-hash, or nothing for a
// created path), each refusal named. Used at the end of a session under
// work_dir_mode: write, and by `flightrec apply` for a kept overlay.
//
// flightrec runs as host root here and both trees hold what the sandbox
// made or named: every path is opened beneath its tree's directory with no
// symlink on any component (sandbox/layer.h); a file is never written in
// place (a new file, then a rename: a hard link planted in the work
// directory is replaced, never written through); what is created gets the
// work directory owner's ids and loses set-id bits.
#include <sys/types.h>

#include <string>
#include <vector>

#include "sandbox/changes.h"

namespace flightrec::sandbox {

struct ApplyOptions {
  std::string upper;      // the session's upper layer of the work directory (the after-state)
  std::string work_dir;   // the host's work directory; the changes' paths lie below it
  uid_t uid = 0;          // owner of what is created
  gid_t gid = 0;
  std::vector<std::string> protect;  // paths relative to work_dir that are never changed
  // When the session began (CLOCK_REALTIME_COARSE, ns): a host path whose
  // ctime is at or after it was changed by someone else meanwhile (the
  // overlay's lower layer is the live work directory, so its "before" is
  // not enough) and is refused. ctime cannot be set back by a user.
  int64_t session_start_ns = 0;
  // The work directory as it was when the session began: if the path names
  // another directory now (replaced, or by a symlink), nothing is written.
  dev_t work_dev = 0;
  ino_t work_ino = 0;
  bool dry_run = false;
  // work_dir is a new, empty directory of flightrec's: the after-state of
  // every file, directory and symlink is copied into it (parents made as
  // needed), deletions skipped. How an overlay session's changes are kept.
  bool into_empty = false;
};

struct Applied {
  const FileChange* change;
  bool ok;             // applied (or, in a dry run, would be)
  std::string why;     // refused: the reason, one line
};

// Whether `path` (absolute) is protected: at or below an entry of
// `protect` (relative to work_dir).
bool protected_path(const std::string& path, const std::string& work_dir, const std::vector<std::string>& protect);
// The protected path it is at or below ("" when none): the entry of
// `protect`, or the git directory.
std::string protected_root(const std::string& path, const std::string& work_dir, const std::vector<std::string>& protect);

// Deletions first (deepest first), then the rest (shallowest first); the
// result follows that order.
std::vector<Applied> apply_changes(const std::vector<FileChange>& changes, const ApplyOptions& o);

}  // namespace flightrec::sandbox
