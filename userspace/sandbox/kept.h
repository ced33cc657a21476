#pragma once
// Changes of a session kept aside (work_dir_mode: overlay), for
// `flightrec changes` and `flightrec apply`:
//   /var/lib/flightrec/changes/<session dir name>/files/...  the after-state
//   /var/lib/flightrec/changes/<session dir name>/meta.json  what it belongs to
// Only root writes there (0700), so the meta file, not the record (which
// whoever can write the database could edit), says which work directory
// and owner the copy is for.
#include <sys/types.h>

#include <optional>
#include <string>

namespace flightrec::sandbox {

inline const std::string kKeptChangesDir = "/var/lib/flightrec/changes";

struct KeptMeta {
  std::string work_dir;
  uid_t uid = 0;
  gid_t gid = 0;
  int64_t session_start_ns = 0;  // ApplyOptions::session_start_ns
  uint64_t work_dev = 0, work_ino = 0;  // ApplyOptions::work_dev, work_ino
};

bool write_kept_meta(const std::string& kept, const KeptMeta& meta);
// `kept` as a record names it: a directory directly below
// kKeptChangesDir, owned by root, not a symlink, with a meta file; its
// meta, or nullopt with *why set.
std::optional<KeptMeta> read_kept(const std::string& kept, std::string* why);

}  // namespace flightrec::sandbox
