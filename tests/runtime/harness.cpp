#include "runtime/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace rt {

Proc start(const std::vector<std::string>& argv) { return start_in("", argv, {}); }

Proc start_in(const std::string& cwd, const std::vector<std::string>& argv, const std::vector<std::string>& env,
              bool pipe_stdin) {
  int out[2], err[2], in[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || (pipe_stdin && pipe2(in, O_CLOEXEC) != 0))
    throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    if (pipe_stdin) dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  if (pipe_stdin) close(in[0]);
  return Proc{pid, out[0], err[0], in[1]};
}

Result wait(Proc& p) {
  Result r;
  if (p.in_fd >= 0) {
    close(p.in_fd);
    p.in_fd = -1;
  }
  pollfd fds[2] = {{p.out_fd, POLLIN, 0}, {p.err_fd, POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, size_t(n));
      }
    }
  }
  int status = 0;
  waitpid(p.pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

Result run_in(const std::string& cwd, const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Proc p = start_in(cwd, argv, env);
  return wait(p);
}

Result run(const std::vector<std::string>& argv) {
  Proc p = start(argv);
  return wait(p);
}

Result flightrec(const std::vector<std::string>& args) {
  std::vector<std::string> argv{FLIGHTREC_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv);
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/flightrec-rt-XXXXXX";
  path = mkdtemp(tmpl);
}
TempDir::~TempDir() { std::filesystem::remove_all(path); }

std::vector<nlohmann::json> entries(const std::string& db) {
  Result r = flightrec({"query", "--db", db, "--json"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  std::vector<nlohmann::json> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

bool eventually(const std::function<bool()>& pred, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

std::vector<nlohmann::json> of_type(const std::vector<nlohmann::json>& all, const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& e : all)
    if (e.value("type", "") == type) out.push_back(e);
  return out;
}

Listener::Listener(int backlog) {
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("listener");
  port = ntohs(a.sin_port);
}
Listener::~Listener() { close(fd); }

bool is_root() { return geteuid() == 0; }

std::string sqlite(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  if (sqlite3_open(db.c_str(), &h) != SQLITE_OK) throw std::runtime_error("sqlite open");
  std::string out;
  char* err = nullptr;
  int rc = sqlite3_exec(
      h, sql.c_str(),
      [](void* o, int n, char** vals, char**) {
        auto* s = static_cast<std::string*>(o);
        for (int i = 0; i < n; ++i) *s += (i ? "|" : "") + std::string(vals[i] ? vals[i] : "");
        *s += "\n";
        return 0;
      },
      &out, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(h);
  if (rc != SQLITE_OK) throw std::runtime_error("sqlite: " + msg);
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string cgroup2_root() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line);
    std::string id, parent, dev, root, mountpoint;
    head >> id >> parent >> dev >> root >> mountpoint;
    return mountpoint;
  }
  return "";
}

int occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

Daemon::Daemon(const std::string& config) { proc = start({FLIGHTRECD_BIN, "--config", config}); }

bool Daemon::await(const std::string& text, int times, int timeout_ms) {
  // In whole lines only: a line may arrive in pieces.
  auto count = [&] { return occurrences(err.substr(0, err.rfind('\n') + 1), text); };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (count() < times) {
    int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) return false;
    pollfd p{proc.err_fd, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = read(proc.err_fd, buf, sizeof(buf));
    if (n <= 0) return count() >= times;
    err.append(buf, size_t(n));
  }
  return true;
}

Result Daemon::stop(int sig) {
  kill(proc.pid, sig);
  Result r = wait(proc);
  r.err = err + r.err;
  proc.pid = -1;
  return r;
}

Daemon::~Daemon() {
  if (proc.pid > 0) stop(SIGKILL);
}

int port_when_listening(const std::string& port_file, const std::string& what) {
  for (int i = 0; i < 1200 && !std::filesystem::exists(port_file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE_MESSAGE(std::filesystem::exists(port_file), std::string(what + " did not start"));
  return std::stoi(slurp(port_file));
}

HttpsServer::HttpsServer() {
  std::string www = dir.file("www");
  std::filesystem::create_directory(www);
  std::ofstream(www + "/x") << "hello tls body\n";
  big.resize(1 << 20);
  uint32_t v = 2463534242u;
  for (char& c : big) {  // xorshift: bytes that do not compress or repeat
    v ^= v << 13;
    v ^= v >> 17;
    v ^= v << 5;
    c = char(v);
  }
  std::ofstream(www + "/big", std::ios::binary) << big;
  Result r = run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir.file("key.pem"), "-out",
                  dir.file("cert.pem"), "-days", "1", "-subj", "/CN=localhost"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  proc = start({"/usr/bin/python3", TLS_SERVER, www, dir.file("cert.pem"), dir.file("key.pem"), dir.file("port")});
  port = port_when_listening(dir.file("port"), "the HTTPS server");
}

HttpsServer::~HttpsServer() {
  kill(proc.pid, SIGKILL);
  wait(proc);
}

std::vector<std::string> records_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec))
    if (it->path().extension() == ".db") out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string sha256_hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md) out += std::string{hex[c >> 4], hex[c & 15]};
  return out;
}

nlohmann::json otlp_decoded(const std::string& pb_file) {
  const std::string modules = "/opt/flightrec-test-otel";
  REQUIRE_MESSAGE(access((modules + "/node_modules/@opentelemetry/otlp-transformer").c_str(), R_OK) == 0,
                  "OpenTelemetry's decoder is not installed: run tools/install-deps.sh");
  Result r = run({"node", std::string(SOURCE_DIR) + "/tests/programs/otlp_decode.js", modules, pb_file});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return nlohmann::json::parse(r.out);
}

std::vector<nlohmann::json> otlp_spans(const nlohmann::json& request) {
  std::vector<nlohmann::json> out;
  for (const auto& rs : request.value("resourceSpans", nlohmann::json::array()))
    for (const auto& ss : rs.value("scopeSpans", nlohmann::json::array()))
      for (const auto& s : ss.value("spans", nlohmann::json::array())) out.push_back(s);
  return out;
}

nlohmann::json span_attribute(const nlohmann::json& span, const std::string& key) {
  for (const auto& a : span.value("attributes", nlohmann::json::array()))
    if (a["key"] == key) return a["value"];
  return nullptr;
}

MockApi::MockApi(const std::vector<std::string>& options) {
  ca = dir.file("ca.pem");
  std::string key = dir.file("key.pem"), cert = dir.file("cert.pem"), csr = dir.file("cert.csr"), ext = dir.file("leaf.ext");
  std::ofstream(ext) << "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                        "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n";
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            dir.file("ca-key.pem"), "-out", ca, "-days", "2", "-subj", "/CN=flightrec test CA", "-addext",
            "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"},
           {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
            "-out", csr, "-subj", "/CN=localhost"},
           {"openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", dir.file("ca-key.pem"), "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext}})
    REQUIRE(run(argv).code == 0);
  // Debian's python3: its python3-h2 serves HTTP/2.
  std::vector<std::string> argv = {"/usr/bin/python3", std::string(SOURCE_DIR) + "/tests/programs/mock_llm_api.py",
                                   "--port", "0", "--cert", cert, "--key", key, "--log", dir.file("requests.jsonl")};
  argv.insert(argv.end(), options.begin(), options.end());
  proc = start(argv);
  std::string line;
  char c;
  while (line.find('\n') == std::string::npos && read(proc.out_fd, &c, 1) == 1) line += c;
  REQUIRE_MESSAGE(line.starts_with("PORT "), "the mock API did not start: " << line);
  port = std::stoi(line.substr(5));
}

MockApi::~MockApi() {
  kill(proc.pid, SIGTERM);
  wait(proc);
}

std::vector<nlohmann::json> MockApi::requests() const {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(dir.file("requests.jsonl")));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

namespace {

// A TCP server on addr:port that says "from <addr>" to each connection
// and then echoes what it is sent.
const char* kGreeter =
    "import socket, sys, threading\n"
    "addr, port = sys.argv[1], int(sys.argv[2])\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, port)); s.listen(16)\n"
    "def serve(c):\n"
    "    with c:\n"
    "        c.sendall(b'from ' + addr.encode() + b'\\n')\n"
    "        while True:\n"
    "            d = c.recv(100)\n"
    "            if not d: return\n"
    "            c.sendall(d)\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()\n";

}  // namespace

void await_ready(Proc& p) {
  std::string got;
  char c;
  while (got.find("ready") == std::string::npos && read(p.out_fd, &c, 1) == 1) got += c;
  REQUIRE_MESSAGE(got.find("ready") != std::string::npos, "a test server did not start");
}

std::string await_said(Proc& p, const std::string& text) {
  std::string said;
  char c;
  while (said.find(text) == std::string::npos && read(p.err_fd, &c, 1) == 1) said += c;
  return said;
}

NamesWorld::NamesWorld(std::string zone) {
  net = "127.78." + std::to_string(getpid() % 200 + 1) + ".";
  set_zone(std::move(zone));
  std::ofstream(dir.file("greeter.py")) << kGreeter;
  procs.push_back(start({"/usr/bin/python3", std::string(SOURCE_DIR) + "/tests/programs/dns_server.py", net + "53",
                         dir.file("zone.json"), dir.file("queries.log")}));
  for (const char* host : {"1", "2", "3"})
    procs.push_back(start({"/usr/bin/python3", dir.file("greeter.py"), net + host, "8080"}));
  for (auto& p : procs) await_ready(p);
}

NamesWorld::~NamesWorld() {
  for (auto& p : procs) {
    kill(p.pid, SIGKILL);
    wait(p);
  }
}

void NamesWorld::set_zone(std::string zone) {
  for (size_t at; (at = zone.find("NET")) != std::string::npos;) zone.replace(at, 3, net);
  std::ofstream(dir.file("zone.json")) << zone;
}

std::string NamesWorld::queries() const { return slurp(dir.file("queries.log")); }

}  // namespace rt
