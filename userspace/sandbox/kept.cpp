#include "sandbox/kept.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/system.h"

namespace flightrec::sandbox {

bool write_kept_meta(const std::string& kept, const KeptMeta& meta) {
  nlohmann::json j = {{"work_dir", meta.work_dir}, {"uid", meta.uid}, {"gid", meta.gid}, {"session_start_ns", meta.session_start_ns},
                      {"work_dev", meta.work_dev}, {"work_ino", meta.work_ino}};
  std::string text = j.dump() + "\n";
  int fd = open((kept + "/meta.json").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
  return close(fd) == 0 && ok;
}

std::optional<KeptMeta> read_kept(const std::string& kept, std::string* why) {
  const std::string base = kKeptChangesDir + "/";
  std::string name = kept.starts_with(base) ? kept.substr(base.size()) : "";
  if (name.empty() || name == "." || name == ".." ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != std::string::npos) {
    *why = "the record names " + kept + ", which is not a directory of kept changes (" + base + "NAME)";
    return std::nullopt;
  }
  struct stat st;
  for (const std::string& dir : {kKeptChangesDir, kept, kept + "/files"})
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
      *why = dir + " is gone, or is not a directory only root can change";
      return std::nullopt;
    }
  int fd = open((kept + "/meta.json").c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  std::string text;
  if (fd >= 0) {
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) text.assign(buf, size_t(n));
    close(fd);
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("work_dir") || !j["work_dir"].is_string() || !j.contains("uid") ||
      !j["uid"].is_number_unsigned() || !j.contains("gid") || !j["gid"].is_number_unsigned() ||
      !j.contains("session_start_ns") || !j["session_start_ns"].is_number_integer() || !j.contains("work_dev") ||
      !j["work_dev"].is_number_unsigned() || !j.contains("work_ino") || !j["work_ino"].is_number_unsigned()) {
    *why = kept + "/meta.json is missing or malformed";
    return std::nullopt;
  }
  return KeptMeta{j["work_dir"].get<std::string>(), j["uid"].get<uid_t>(), j["gid"].get<gid_t>(),
                  j["session_start_ns"].get<int64_t>(), j["work_dev"].get<uint64_t>(), j["work_ino"].get<uint64_t>()};
}

}  // namespace flightrec::sandbox
