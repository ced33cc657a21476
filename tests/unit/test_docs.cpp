// The docs' YAML is the code's: every policy and daemon config example in
// the README, policies/README.md, docs/ and examples/ is read by the loader
// that reads the real files, so a key the docs show and the code refuses
// (or one renamed in the code) fails here.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "policy/policy.h"

namespace {

struct Block {
  std::string where, text;
};

// Fenced blocks (``` or ```yaml) whose first line is a top-level key a
// policy or the daemon's config has.
std::vector<Block> yaml_blocks(const std::string& path) {
  std::ifstream in(path);
  std::vector<Block> out;
  std::string line, text;
  int n = 0, start = 0;
  bool in_block = false;
  while (std::getline(in, line)) {
    ++n;
    if (line.starts_with("```")) {
      if (in_block) {
        static const char* kKeys[] = {"version:", "name:", "outputs:", "runs:", "watch:", "storage:", "lite:"};
        for (const char* key : kKeys)
          if (text.starts_with(key)) {
            out.push_back({path + ":" + std::to_string(start), text});
            break;
          }
      }
      in_block = !in_block;
      text.clear();
      start = n + 1;
    } else if (in_block) {
      text += line + "\n";
    }
  }
  return out;
}

}  // namespace

TEST_CASE("docs: every YAML example of a policy or a daemon config is read by flightrec's own loaders") {
  namespace fs = std::filesystem;
  std::vector<std::string> files = {SOURCE_DIR "/README.md", SOURCE_DIR "/policies/README.md"};
  for (const char* dir : {SOURCE_DIR "/docs", SOURCE_DIR "/examples"})
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".md") files.push_back(entry.path().string());
  int policies = 0, configs = 0;
  for (const auto& file : files)
    for (const auto& b : yaml_blocks(file)) {
      CAPTURE(b.where);
      bool policy = b.text.starts_with("version:") && b.text.find("\nname:") != std::string::npos;
      try {
        if (policy) {
          flightrec::policy::parse(b.text, b.where);
          ++policies;
        } else {
          // A fragment of the daemon's config: the two required keys added, the rest at its defaults.
          bool whole = b.text.starts_with("version:");
          flightrec::daemon::parse_config(whole ? b.text : "version: 1\nstorage: {dir: /var/lib/flightrec}\n" + b.text,
                                          whole ? b.where : b.where + " (2 lines added above)");
          ++configs;
        }
      } catch (const std::exception& e) {
        FAIL_CHECK(std::string(e.what()));
      }
    }
  // The examples that exist today: none of them may silently stop being found.
  CHECK(policies >= 2);
  CHECK(configs >= 6);
  // And the example policy files.
  for (const auto& entry : fs::directory_iterator(SOURCE_DIR "/examples"))
    if (entry.path().extension() == ".yaml") {
      CAPTURE(entry.path().string());
      CHECK_NOTHROW(flightrec::policy::load(entry.path().string()));
    }
}
