#pragma once
// What a session changed, as a reviewer reads it: the files changed at its
// end grouped by directory, with what it created in generated trees (a
// venv, node_modules, caches, git's own data) folded into one row each so
// that the few edits a person made are not buried under thousands of
// installed files. Files that existed before are never folded.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace flightrec::inspect {

struct ChangedFile {
  int64_t seq = 0, size = -1;  // size -1: not recorded (deleted)
  uint32_t mode = 0;
  std::string path, change, kind, sha256_before, sha256_after;
  std::string outcome;  // "applied", "refused: why", or "" (not written back)
};

struct FoldedTree {
  std::string root;                          // the tree's top directory
  std::string why;                           // "a Python virtual environment", ...
  std::map<std::string, int64_t> by_change;  // created -> n, ...
  int64_t bytes = 0;
  std::vector<ChangedFile> files;            // the first kShownPerTree
};

class ChangeView {
 public:
  static constexpr size_t kMaxFiles = 100000;   // kept; past it only counted
  static constexpr size_t kShownPerTree = 200;  // listed inside a folded tree
  static constexpr size_t kMaxPath = 4096;      // PATH_MAX: longer paths are counted only

  explicit ChangeView(std::string work_dir) : work_dir_(std::move(work_dir)) {}
  // A file_change entry; those made at the session's end (when: end) count.
  void add(const nlohmann::json& file_change);

  struct View {
    std::map<std::string, std::vector<ChangedFile>> edits;  // directory -> files, outside generated trees
    std::vector<FoldedTree> folded;                         // largest first
    size_t files = 0, not_kept = 0;
  };
  View view() const;
  const std::string& work_dir() const { return work_dir_; }
  // The path as shown: relative to the work directory when inside it.
  std::string shown(const std::string& path) const;

 private:
  std::string work_dir_;
  std::vector<ChangedFile> files_;
  size_t not_kept_ = 0;
};

}  // namespace flightrec::inspect
