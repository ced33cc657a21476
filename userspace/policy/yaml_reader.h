#pragma once
// Strict reading of a YAML file checked key by key (policies, the daemon's
// config): every error names the file, the line and the key, and throws
// ErrorT. yaml-cpp keeps the line of every node.
#include <map>
#include <set>
#include <string>
#include <yaml-cpp/yaml.h>

namespace flightrec::policy {

template <typename ErrorT>
class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& n, const std::string& key, const std::string& what) const {
    std::string where = source_;
    if (n.IsDefined() && n.Mark().line >= 0) where += ":" + std::to_string(n.Mark().line + 1);
    throw ErrorT(where + ": " + key + ": " + what);
  }

  // Every key must be one we know, and appear once: a typo is an error, not
  // a silently ignored rule, and of two equal keys yaml-cpp keeps both
  // while lookups see only the first, so the second would be ignored.
  void only_keys(const YAML::Node& map, const std::string& path, const std::set<std::string>& known) const {
    if (!map.IsMap()) fail(map, path.empty() ? "top level" : path, "must be a mapping");
    std::set<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) fail(kv.first, path.empty() ? "top level" : path, "a key must be a plain name, not a list or a mapping");
      std::string k = kv.first.Scalar();
      std::string full = path.empty() ? k : path + "." + k;
      if (!known.count(k)) {
        std::string list;
        for (const auto& x : known) list += (list.empty() ? "" : ", ") + x;
        fail(kv.first, full, "unknown key (known: " + list + ")");
      }
      if (!seen.insert(k).second) fail(kv.first, full, "given twice");
    }
  }

  std::string str(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, key, "must be a string");
    return n.Scalar();
  }

  bool boolean(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    if (s == "true") return true;
    if (s == "false") return false;
    fail(n, key, "must be true or false, not '" + s + "'");
  }

  template <typename T>
  T choice(const YAML::Node& n, const std::string& key, const std::map<std::string, T>& values) const {
    std::string s = str(n, key);
    auto it = values.find(s);
    if (it != values.end()) return it->second;
    std::string list;
    for (const auto& [k, v] : values) list += (list.empty() ? "" : ", ") + k;
    fail(n, key, "'" + s + "' is not one of: " + list);
  }

  // The document, or ErrorT at the line where the text stops being YAML.
  YAML::Node load(const std::string& text) const {
    try {
      return YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ErrorT(at(e) + ": not valid YAML: " + e.msg);
    }
  }

  // read(): yaml-cpp throws on shapes it cannot convert (a mapping as a
  // key, ...), and those are errors in the file too, at their line.
  template <typename Read>
  static auto converting(const std::string& source, Read read) -> decltype(read()) {
    try {
      return read();
    } catch (const YAML::Exception& e) {
      throw ErrorT(source + ":" + std::to_string(e.mark.line + 1) + ": not valid here: " + e.msg);
    }
  }

  const std::string& source() const { return source_; }

 private:
  std::string at(const YAML::Exception& e) const { return source_ + ":" + std::to_string(e.mark.line + 1); }
  std::string source_;
};

}  // namespace flightrec::policy
