#pragma once
// Runs the real flightrec binary and real programs, and reads records back
// through `flightrec query --json`.
#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rt {

struct Result {
  int code = -1;         // exit code, or 128+signal
  std::string out, err;
};

struct Proc {
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  int in_fd = -1;  // its stdin, when asked for (closed by wait)
};

Proc start(const std::vector<std::string>& argv);
// In directory cwd (if not empty), with NAME=VALUE entries added to the
// environment; with pipe_stdin, its stdin is a pipe from Proc::in_fd.
Proc start_in(const std::string& cwd, const std::vector<std::string>& argv, const std::vector<std::string>& env,
              bool pipe_stdin = false);
Result run_in(const std::string& cwd, const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
Result wait(Proc& p);
Result run(const std::vector<std::string>& argv);
Result flightrec(const std::vector<std::string>& args);

struct TempDir {
  std::filesystem::path path;
  TempDir();
  ~TempDir();
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// Every entry of the record, in order.
std::vector<nlohmann::json> entries(const std::string& db);
std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& all, const std::string& type);

// A TCP listener on 127.0.0.1 with a kernel-chosen port; connections
// complete in the backlog without accept().
struct Listener {
  int fd = -1;
  int port = 0;
  Listener();
  ~Listener();
};

bool is_root();
std::string cgroup2_root();  // where cgroup v2 is mounted ("" if nowhere)
std::string sqlite(const std::string& db, const std::string& sql);  // via the sqlite3 API
std::string slurp(const std::string& path);
int count_lines(const std::string& s);

}  // namespace rt
