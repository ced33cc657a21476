#include "inspect/change_view.h"

#include <algorithm>
#include <set>

#include "policy/judge.h"

namespace flightrec::inspect {

using nlohmann::json;

namespace {

std::string str(const json& e, const char* key) {
  return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
}

// Directory names that tools generate, and what they are. Folded, never
// hidden: the page lists their files inside a collapsed row.
const char* generated(const std::string& name) {
  static const std::map<std::string, const char*> kNames = {
      {"node_modules", "npm packages"},     {"__pycache__", "Python bytecode"},
      {".git", "git's own data"},           {".venv", "a Python virtual environment"},
      {"venv", "a Python virtual environment"}, {"site-packages", "Python packages"},
      {".tox", "tox environments"},         {".nox", "nox environments"},
      {".mypy_cache", "a cache"},           {".pytest_cache", "a cache"},
      {".ruff_cache", "a cache"},           {".cache", "a cache"},
      {".npm", "npm's cache"},              {".yarn", "yarn's cache"},
      {".pnpm-store", "pnpm's store"},      {".gradle", "Gradle's cache"},
      {".next", "Next.js output"},          {".eggs", "Python eggs"}};
  auto it = kNames.find(name);
  if (it != kNames.end()) return it->second;
  if (name.ends_with(".egg-info") || name.ends_with(".dist-info")) return "Python package metadata";
  return nullptr;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

void ChangeView::add(const json& e) {
  if (!e.is_object() || str(e, "when") != "end") return;
  // (The kernel's paths are at most PATH_MAX: a longer one is a hostile
  // record's, and folding walks every path's components.)
  if (files_.size() >= kMaxFiles || str(e, "path").size() > kMaxPath) {
    ++not_kept_;
    return;
  }
  ChangedFile f;
  f.seq = e.contains("seq") && e["seq"].is_number_integer() ? e["seq"].get<int64_t>() : 0;
  f.size = e.contains("size") && e["size"].is_number_integer() ? e["size"].get<int64_t>() : -1;
  f.mode = e.contains("mode") && e["mode"].is_number_unsigned() ? uint32_t(e["mode"].get<uint64_t>()) : 0;
  f.path = str(e, "path");
  f.change = str(e, "change");
  f.kind = str(e, "kind");
  f.sha256_before = str(e, "sha256_before");
  f.sha256_after = str(e, "sha256_after");
  if (e.contains("refused")) f.outcome = "refused: " + str(e, "refused");
  else if (e.contains("applied")) f.outcome = "applied";
  files_.push_back(std::move(f));
}

std::string ChangeView::shown(const std::string& path) const {
  if (!work_dir_.empty() && path != work_dir_ && policy::path_under(path, work_dir_))
    return path.substr(work_dir_.size() + (work_dir_ == "/" ? 0 : 1));
  return path;
}

ChangeView::View ChangeView::view() const {
  View v;
  v.files = files_.size() + not_kept_;
  v.not_kept = not_kept_;
  // A directory the session created with a pyvenv.cfg in it is a virtual
  // environment, whatever its name.
  std::set<std::string> created_dirs, venvs;
  for (const auto& f : files_)
    if (f.change == "created" && f.kind == "dir") created_dirs.insert(shown(f.path));
  for (const auto& f : files_)
    if (f.change == "created" && f.path.ends_with("/pyvenv.cfg") && created_dirs.count(dir_of(shown(f.path))))
      venvs.insert(dir_of(shown(f.path)));
  std::map<std::string, FoldedTree> trees;
  for (const auto& f : files_) {
    std::string rel = shown(f.path);
    // The outermost generated directory on the path (or a venv) is the tree.
    std::string root, why;
    for (size_t at = 0; root.empty();) {
      size_t slash = rel.find('/', at);
      if (slash == std::string::npos) break;
      std::string prefix = rel.substr(0, slash), name = rel.substr(at, slash - at);
      if (venvs.count(prefix)) root = prefix, why = "a Python virtual environment";
      else if (const char* w = generated(name)) root = prefix, why = w;
      at = slash + 1;
    }
    // The tree's own top directory belongs to it too.
    std::string name = rel.substr(rel.rfind('/') + 1);
    if (root.empty() && venvs.count(rel)) root = rel, why = "a Python virtual environment";
    if (root.empty() && f.kind == "dir")
      if (const char* w = generated(name)) root = rel, why = w;
    // Only what the session made is folded: a file that existed before and
    // was changed or removed is an edit wherever it is (a poisoned
    // .venv/bin/activate, a .git hook).
    if (root.empty() || f.change != "created") {
      v.edits[dir_of(rel)].push_back(f);
      continue;
    }
    FoldedTree& t = trees[root];
    t.root = root;
    t.why = why;
    ++t.by_change[f.change];
    if (f.size > 0) t.bytes += f.size;
    if (t.files.size() < kShownPerTree) t.files.push_back(f);
  }
  // Within a directory: what existed before first (modified, deleted), then what is new, by name.
  for (auto& [dir, list] : v.edits)
    std::sort(list.begin(), list.end(), [](const ChangedFile& a, const ChangedFile& b) {
      bool a_new = a.change == "created", b_new = b.change == "created";
      return a_new != b_new ? b_new : a.path != b.path ? a.path < b.path : a.seq < b.seq;
    });
  for (auto& [root, t] : trees) v.folded.push_back(std::move(t));
  auto count = [](const FoldedTree& t) {
    int64_t n = 0;
    for (const auto& [c, k] : t.by_change) n += k;
    return n;
  };
  std::stable_sort(v.folded.begin(), v.folded.end(), [&](const FoldedTree& a, const FoldedTree& b) { return count(a) > count(b); });
  return v;
}

}  // namespace flightrec::inspect
