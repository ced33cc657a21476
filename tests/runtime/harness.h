#pragma once
// Runs the real flightrec binary and real programs, and reads records back
// through `flightrec query --json`.
#include <sys/types.h>

#include <filesystem>
#include <functional>
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
// Asks pred every 50 ms until it holds or timeout_ms have passed: whether it
// held. For what a test waits on, instead of a fixed sleep.
bool eventually(const std::function<bool()>& pred, int timeout_ms);
std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& all, const std::string& type);

// A TCP listener on 127.0.0.1 with a kernel-chosen port; connections
// complete in the backlog without accept(), up to `backlog` of them.
struct Listener {
  int fd = -1;
  int port = 0;
  explicit Listener(int backlog = 16);
  ~Listener();
};

// How many times `needle` stands in `text`.
int occurrences(const std::string& text, const std::string& needle);

// flightrecd running with a config file; its stderr read as it comes.
struct Daemon {
  Proc proc;
  std::string err;
  explicit Daemon(const std::string& config);
  // Waits until stderr holds `text` `times` times (or the daemon exits).
  // A wait, not a timing check: under tools/vmtest's emulation loading the
  // programs alone has taken over 10 s.
  bool await(const std::string& text, int times = 1, int timeout_ms = 60000);
  Result stop(int sig = 15 /* SIGTERM */);
  ~Daemon();
};

// The port a test server wrote to port_file once it listens; up to a
// minute: python's start-up is slow under emulation (tools/vmtest).
int port_when_listening(const std::string& port_file, const std::string& what);

// tests/programs/https_server.py on a local port with a self-signed
// certificate made here: /x is a short body, /big 1 MiB.
struct HttpsServer {
  TempDir dir;
  Proc proc;
  int port = 0;
  std::string big;  // 1 MiB served as /big
  HttpsServer();
  ~HttpsServer();
  std::string url(const std::string& path) const { return "https://127.0.0.1:" + std::to_string(port) + path; }
};

// tests/programs/mock_llm_api.py over HTTPS, its certificate signed by a CA
// of its own (rustls refuses a self-signed server certificate): ca is that
// CA's file; requests() what the mock logged, one JSON object per request.
struct MockApi {
  TempDir dir;
  Proc proc;
  int port = 0;
  std::string ca;
  // options: mock_llm_api.py's (--http2: ALPN offers h2 too; --parallel: two tool calls in one answer).
  explicit MockApi(const std::vector<std::string>& options = {});
  ~MockApi();
  MockApi(const MockApi&) = delete;
  MockApi& operator=(const MockApi&) = delete;
  std::vector<nlohmann::json> requests() const;
};

// An OTLP trace request (protobuf) as OpenTelemetry's own decoder reads it
// (tests/programs/otlp_decode.js), in OTLP/JSON form; its spans, flattened.
nlohmann::json otlp_decoded(const std::string& pb_file);
std::vector<nlohmann::json> otlp_spans(const nlohmann::json& request);
// A span's attribute by key, as OTLP/JSON writes its value ({"stringValue": ...}), or null.
nlohmann::json span_attribute(const nlohmann::json& span, const std::string& key);

// A world of names on loopback addresses of the test's own (127.78.N.x):
// tests/programs/dns_server.py on .53 serving `zone` (JSON; "NET" in it
// becomes the prefix), and at .1, .2 and .3 port 8080 a server that says
// "from ADDR" to each connection and then echoes.
// Waits for a test server's "ready" line on stdout (REQUIREs it).
void await_ready(Proc& p);
// What p writes on stderr up to and including `text` (all of it, if p
// ends first): e.g. `flightrec watch` saying "watching" once attached.
std::string await_said(Proc& p, const std::string& text);

struct NamesWorld {
  TempDir dir;
  std::string net;  // "127.78.N."
  std::vector<Proc> procs;
  explicit NamesWorld(std::string zone);
  ~NamesWorld();
  NamesWorld(const NamesWorld&) = delete;
  NamesWorld& operator=(const NamesWorld&) = delete;
  void set_zone(std::string zone);
  std::string queries() const;  // "name type transport" lines, as the server was asked
};

bool is_root();
std::string cgroup2_root();  // where cgroup v2 is mounted ("" if nowhere)
std::string sqlite(const std::string& db, const std::string& sql);  // via the sqlite3 API
std::string slurp(const std::string& path);
int count_lines(const std::string& s);
std::string sha256_hex(const std::string& data);  // lowercase hex
std::vector<std::string> records_in(const std::string& dir);  // the .db files below dir, sorted

}  // namespace rt
