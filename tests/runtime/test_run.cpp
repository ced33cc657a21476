// flightrec run on the real kernel: exact syscalls, processes and
// addresses of known programs, and nothing from outside the session.
#include <algorithm>
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <map>
#include <thread>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

const json* find(const std::vector<json>& all, const std::function<bool(const json&)>& pred) {
  for (const auto& e : all)
    if (pred(e)) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("a path rewritten during the open cannot forge the record: kernel_path names the file opened" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  // 300 directories deep: the kernel's walk is slow enough for the other
  // thread to flip the name many times before the tracer reads it.
  std::string db = dir.file("s.db"), files = dir.path.string();
  for (int i = 0; i < 300; ++i) {
    files += "/dd";
    mkdir(files.c_str(), 0755);
  }
  std::ofstream(files + "/a") << "a";
  std::ofstream(files + "/b") << "b";
  const int n = 300;
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", PATH_RACE_BIN, files, std::to_string(n)});
  REQUIRE(r.code == 0);
  std::string seen = r.out.substr(0, r.out.find('\n'));
  REQUIRE(seen.size() == size_t(n));
  std::vector<json> opens;
  for (const auto& e : of_type(entries(db), "file_open")) {
    std::string path = e.value("path", "");
    if (path == files + "/a" || path == files + "/b") opens.push_back(e);
  }
  REQUIRE(opens.size() == size_t(n));
  int forged = 0;
  for (int i = 0; i < n; ++i) {
    INFO(opens[size_t(i)].dump());
    // The byte the program read says which file the kernel opened.
    CHECK(opens[size_t(i)]["kernel_path"] == files + "/" + std::string(1, seen[size_t(i)]));
    forged += opens[size_t(i)]["path"] != opens[size_t(i)]["kernel_path"];
  }
  MESSAGE(forged << " of " << n << " path arguments named the other file by the time they were read");
  // A relative path through a symlink: the argument as given, the file as opened.
  Result s = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                            "cd " + files + " && ln -s a link && cat link"});
  REQUIRE(s.code == 0);
  bool found = false;
  for (const auto& e : of_type(entries(db), "file_open"))
    if (e.value("path", "") == "link") {
      CHECK(e["kernel_path"] == files + "/a");
      found = true;
    }
  CHECK(found);
}

TEST_CASE("an address rewritten during the connect cannot forge the record: the kernel's peer is recorded" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  const int n = 300;
  Listener a(n + 16), b(n + 16);  // every connect completes in a backlog
  Result r = flightrec({"run", "--policy", "observe", "--tls", "off", "--db", db, "--", CONNECT_RACE_BIN, "127.0.0.1",
                        std::to_string(a.port), std::to_string(b.port), std::to_string(n)});
  INFO(r.err);
  REQUIRE(r.code == 0);
  // Line 2: one letter per connect, the port getpeername says it reached.
  std::string order = r.out.substr(r.out.find('\n') + 1);
  order = order.substr(0, order.find('\n'));
  REQUIRE(order.size() == size_t(n));
  REQUIRE(order.find('x') == std::string::npos);
  std::vector<json> connects;
  for (const auto& e : of_type(entries(db), "connect"))
    if (e.value("addr", "") == "127.0.0.1" && (e["port"] == a.port || e["port"] == b.port)) connects.push_back(e);
  REQUIRE(connects.size() == size_t(n));
  int rewritten = 0;
  for (int i = 0; i < n; ++i) {
    const json& e = connects[size_t(i)];
    INFO(e.dump());
    CHECK(e["port"] == (order[size_t(i)] == 'a' ? a.port : b.port));
    CHECK(e.value("addr_from_kernel", 0) == 1);
  }
  for (char c : order) rewritten += c == 'b';
  MESSAGE(rewritten << " of " << n << " connects reached the rewritten port");
  // getpeername's answer is the kernel's too, not the buffer it wrote.
  int peers = 0;
  for (const auto& e : of_type(entries(db), "syscall"))
    if (e.value("name", "") == "getpeername" && e.value("ret", -1) == 0) {
      CHECK(e.value("addr_from_kernel", 0) == 1);
      ++peers;
    }
  CHECK(peers == n);
}

TEST_CASE("a bind records the port it asked for, from the socket; port 0 stays 0, getsockname says the one chosen" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  int port;
  {
    Listener free_port;  // a port the kernel says is free (closed again)
    port = free_port.port;
  }
  const char* script =
      "import socket, sys\n"
      "a = socket.socket(); a.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "a.bind(('127.0.0.1', int(sys.argv[1])))\n"
      "b = socket.socket(); b.bind(('127.0.0.1', 0))\n"
      "print(b.getsockname()[1])\n";
  Result r = flightrec({"run", "--policy", "observe", "--tls", "off", "--db", db, "--", "python3", "-c", script,
                        std::to_string(port)});
  INFO(r.err);
  REQUIRE(r.code == 0);
  int chosen = std::atoi(r.out.c_str());
  REQUIRE(chosen > 0);
  std::vector<int> bound, named;
  for (const auto& e : entries(db)) {
    if (e.value("family", "") != "AF_INET" || e.value("ret", -1) != 0) continue;
    if (e.value("name", "") == "bind") {
      CHECK(e.value("addr_from_kernel", 0) == 1);
      CHECK(e["addr"] == "127.0.0.1");
      bound.push_back(e["port"].get<int>());
    }
    if (e.value("name", "") == "getsockname") named.push_back(e["port"].get<int>());
  }
  // (On 6.1 to 6.8 the kernel keeps the asked-for flag in a bitfield.)
  CHECK(bound == std::vector<int>{port, 0});
  // (Python asks too, of both sockets: each answer is one of their ports.)
  CHECK(std::count(named.begin(), named.end(), chosen) >= 1);
  for (int n : named) CHECK((n == chosen || n == port));
}

TEST_CASE("every record's header names who made it: process, thread, parent, ids, name and cgroup") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  // Read at sys_exit with and without sys_enter: both fill the header the same way.
  for (const char* entry_times : {"on", "off"}) {
    CAPTURE(entry_times);
    TempDir dir;
    std::string db = dir.file("s.db");
    Result r = flightrec({"run", "--policy", "observe", "--tls", "off", "--entry-times", entry_times, "--db", db,
                          "--", HEADER_PROBE_BIN});
    REQUIRE(r.code == 0);
    unsigned long long cgroup = 0, sub = 0;
    int main_pid = 0, thread_tid = 0, child = 0, compat = 0;
    REQUIRE(sscanf(r.out.c_str(), "cgroup %llu main %d thread %d child %d sub %llu compat %d", &cgroup, &main_pid,
                   &thread_tid, &child, &sub, &compat) == 6);
    REQUIRE(thread_tid != main_pid);
    auto all = entries(db);
    auto marker = [&](long arg) {
      return find(all, [&](const json& e) {
        return e["type"] == "syscall" && e.value("name", "") == "getpgid" && e["args"][0] == arg;
      });
    };
    const json* in_thread = marker(4242001);
    REQUIRE(in_thread);
    CHECK((*in_thread)["pid"] == main_pid);
    CHECK((*in_thread)["tid"] == thread_tid);
    CHECK((*in_thread)["comm"] == "hdr-thread");
    CHECK((*in_thread)["uid"] == 0);
    CHECK((*in_thread)["gid"] == 0);
    CHECK((*in_thread)["cgroup_id"] == cgroup);
    const json* in_child = marker(4242002);
    REQUIRE(in_child);
    CHECK((*in_child)["pid"] == child);
    CHECK((*in_child)["tid"] == child);
    CHECK((*in_child)["ppid"] == main_pid);
    CHECK((*in_child)["comm"] == "header_probe");
    CHECK((*in_child)["uid"] == 4321);
    CHECK((*in_child)["gid"] == 1234);
    CHECK((*in_child)["cgroup_id"] == cgroup);
    // The process records name their tasks the same way.
    const json* fork = find(all, [&](const json& e) { return e["type"] == "fork" && e["child_pid"] == child; });
    REQUIRE(fork);
    CHECK((*fork)["pid"] == main_pid);
    CHECK((*fork)["child_tid"] == child);
    CHECK((*fork)["thread"] == 0);
    const json* spawn = find(all, [&](const json& e) { return e["type"] == "fork" && e["child_tid"] == thread_tid; });
    REQUIRE(spawn);
    CHECK((*spawn)["child_pid"] == main_pid);
    CHECK((*spawn)["thread"] == 1);
    // A move of the whole process (a cgroup.procs write) shows in every
    // thread's next record, also in the thread the kernel did not name.
    const json* before_move = marker(4242005);
    const json* moved_main = marker(4242003);
    const json* moved_thread = marker(4242004);
    REQUIRE(before_move);
    REQUIRE(moved_main);
    REQUIRE(moved_thread);
    CHECK((*before_move)["cgroup_id"] == cgroup);
    CHECK((*moved_main)["cgroup_id"] == sub);
    CHECK((*moved_thread)["cgroup_id"] == sub);
    CHECK((*moved_thread)["tid"] != main_pid);
    // A uid set through the 32-bit entry (i386's call numbers) shows too.
    if (compat) {
      const json* after_compat = marker(4242006);
      REQUIRE(after_compat);
      CHECK((*after_compat)["pid"] == compat);
      CHECK((*after_compat)["uid"] == 4322);
    } else {
      MESSAGE("this kernel has no 32-bit syscall entry: the int 0x80 case is not tried");
    }
    const json* gone = find(all, [&](const json& e) { return e["type"] == "exit" && e["pid"] == child; });
    REQUIRE(gone);
    CHECK((*gone)["uid"] == 4321);
    CHECK((*gone)["code"] == 0);
    CHECK((*gone)["cgroup_id"] == cgroup);
  }
}

TEST_CASE("run records the known program's open, connect, forks, exec and exits" * doctest::test_suite("vm-kernel")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db"), marker = dir.file("marker-file");
  Listener listener;
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", KNOWN_SYSCALLS_BIN, std::to_string(listener.port),
                        marker});
  INFO(r.err);
  CHECK(r.code == 7);

  auto all = entries(db);
  REQUIRE(all.size() > 20);
  CHECK(all.front()["type"] == "genesis");
  CHECK(all.back()["type"] == "session_end");
  CHECK(all.back()["exit_code"] == 7);
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i]["seq"] == i + 1);
    CHECK(all[i]["session"] == 1);
    for (const char* k : {"pid", "tid", "ppid", "uid", "comm", "ts_mono_ns", "ts_real_ns"})
      CHECK_MESSAGE(all[i].contains(k), all[i].dump() << " lacks " << k);
  }

  const json* exec_main = find(all, [](const json& e) {
    return e["type"] == "exec" && e["filename"] == KNOWN_SYSCALLS_BIN;
  });
  REQUIRE(exec_main);
  int main_pid = (*exec_main)["pid"];

  const json* open = find(all, [&](const json& e) {
    return e["type"] == "file_open" && e.value("path", "") == marker;
  });
  REQUIRE(open);
  CHECK((*open)["name"] == "openat");
  CHECK((*open)["source"] == "tracepoint");
  CHECK((*open)["pid"] == main_pid);
  CHECK((*open)["flags"] == (O_RDONLY | O_CLOEXEC));
  CHECK((*open)["ret"] == -2);
  CHECK((*open)["err"] == "ENOENT");
  CHECK((*open)["args"].size() == 6);

  const json* conn = find(all, [](const json& e) { return e["type"] == "connect"; });
  REQUIRE(conn);
  CHECK((*conn)["family"] == "AF_INET");
  CHECK((*conn)["addr"] == "127.0.0.1");
  CHECK((*conn)["port"] == listener.port);
  CHECK((*conn)["ret"] == 0);
  CHECK((*conn)["pid"] == main_pid);

  CHECK((*conn)["addr_from_kernel"] == 1);
  // getsockname with a 4-byte buffer: the address is read from the socket
  // (ABI 10), whole, never from memory past the caller's buffer.
  const json* small = find(all, [&](const json& e) { return e.value("name", "") == "getsockname" && e["pid"] == main_pid; });
  REQUIRE(small);
  CHECK((*small)["family"] == "AF_INET");
  CHECK((*small)["addr"] == "127.0.0.1");
  CHECK((*small)["port"].get<int>() > 0);  // the port the kernel chose for the connect
  CHECK((*small)["addr_from_kernel"] == 1);
  CHECK_FALSE(small->contains("sockaddr_b64"));

  // main -> child -> grandchild, which execs true with our marker argument.
  auto forks = of_type(all, "fork");
  const json* f1 = find(forks, [&](const json& e) { return e["pid"] == main_pid; });
  REQUIRE(f1);
  int child = (*f1)["child_pid"];
  const json* f2 = find(forks, [&](const json& e) { return e["pid"] == child; });
  REQUIRE(f2);
  int grandchild = (*f2)["child_pid"];
  const json* exec_true = find(all, [&](const json& e) {
    return e["type"] == "exec" && e["pid"] == grandchild;
  });
  REQUIRE(exec_true);
  CHECK((*exec_true)["argv"] == json::array({"true", "grandchild-marker"}));
  CHECK((*exec_true)["ppid"] == child);

  auto exits = of_type(all, "exit");
  auto exit_of = [&](int pid) {
    return find(exits, [&](const json& e) { return e["pid"] == pid && e["process_exit"] == 1; });
  };
  REQUIRE(exit_of(main_pid));
  CHECK((*exit_of(main_pid))["code"] == 7);
  REQUIRE(exit_of(child));
  CHECK((*exit_of(child))["code"] == 5);
  REQUIRE(exit_of(grandchild));
  CHECK((*exit_of(grandchild))["code"] == 0);

  // The execve of the grandchild carries the path from the kernel, and
  // getppid shows up as a plain syscall with its return value.
  CHECK(find(all, [&](const json& e) {
    return e["type"] == "syscall" && e.value("name", "") == "execve" && e["pid"] == grandchild &&
           e["ret"] == 0 && e.value("path", "") == "/bin/true";
  }));
  CHECK(find(all, [&](const json& e) {
    return e.value("name", "") == "getppid" && e["pid"] == main_pid && e["nr"] == 110;
  }));

  // Entries are traced too (run's default): every call has its start,
  // and exit_group, which never returns, is an entry of its own.
  CHECK(all.front()["capture"].dump().find("tp_btf/sys_enter") != std::string::npos);
  for (const json& e : all)
    if (e.contains("nr")) {
      REQUIRE_MESSAGE(e.contains("ts_enter_mono_ns"), e.dump());
      CHECK(e["ts_enter_mono_ns"].get<uint64_t>() <= e["ts_mono_ns"].get<uint64_t>());
    }
  CHECK(find(all, [&](const json& e) {
    return e.value("name", "") == "exit_group" && e["pid"] == main_pid && e.value("noreturn", 0) == 1 &&
           e["args"][0] == 7;
  }));

  Result v = flightrec({"verify", "--db", db});
  CHECK(v.code == 0);
  CHECK(v.out.rfind("OK: 1 session, " + std::to_string(all.size()) + " entries", 0) == 0);
}

TEST_CASE("--entry-times off: each call read at its return alone, arguments and paths intact" * doctest::test_suite("vm-kernel")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db"), marker = dir.file("marker-file");
  Listener listener;
  Result r = flightrec({"run", "--policy", "observe", "--entry-times", "off", "--db", db, "--", KNOWN_SYSCALLS_BIN,
                        std::to_string(listener.port), marker});
  INFO(r.err);
  CHECK(r.code == 7);
  auto all = entries(db);
  REQUIRE(all.size() > 20);
  std::string capture = all.front()["capture"].dump();
  CHECK(capture.find("tp_btf/sys_exit") != std::string::npos);
  CHECK(capture.find("tp_btf/sys_enter") == std::string::npos);
  const json* exec_main = find(all, [](const json& e) {
    return e["type"] == "exec" && e["filename"] == KNOWN_SYSCALLS_BIN;
  });
  REQUIRE(exec_main);
  int main_pid = (*exec_main)["pid"];

  for (const json& e : all) CHECK_FALSE_MESSAGE(e.contains("ts_enter_mono_ns"), e.dump());
  // The registers at the return are the arguments: path, flags, fd, address.
  const json* open = find(all, [&](const json& e) { return e["type"] == "file_open" && e.value("path", "") == marker; });
  REQUIRE(open);
  CHECK((*open)["name"] == "openat");
  CHECK((*open)["args"][0] == 4294967196);  // AT_FDCWD
  CHECK((*open)["flags"] == (O_RDONLY | O_CLOEXEC));
  CHECK((*open)["err"] == "ENOENT");
  const json* conn = find(all, [](const json& e) { return e["type"] == "connect"; });
  REQUIRE(conn);
  CHECK((*conn)["addr"] == "127.0.0.1");
  CHECK((*conn)["port"] == listener.port);
  CHECK((*conn)["pid"] == main_pid);
  // An address the kernel returned is read from the socket, not from the
  // caller's buffer (whose size is gone at the return alone).
  const json* small = find(all, [&](const json& e) { return e.value("name", "") == "getsockname" && e["pid"] == main_pid; });
  REQUIRE(small);
  CHECK_FALSE(small->contains("sockaddr_error"));
  CHECK((*small)["addr"] == "127.0.0.1");
  CHECK((*small)["addr_from_kernel"] == 1);
  // An exec's path still comes from the kernel; exit_group is the exit entry alone.
  auto forks = of_type(all, "fork");
  CHECK(find(all, [&](const json& e) {
    return e.value("name", "") == "execve" && e["ret"] == 0 && e.value("path", "") == "/bin/true";
  }));
  CHECK_FALSE(find(all, [](const json& e) { return e.value("name", "") == "exit_group"; }));
  CHECK(find(all, [&](const json& e) { return e["type"] == "exit" && e["pid"] == main_pid && e["code"] == 7; }));
  // Each call once: the fork's return in the child is not a call of its own.
  size_t clones = 0;
  for (const json& e : all)
    if (e.value("name", "") == "clone" || e.value("name", "") == "fork" || e.value("name", "") == "vfork") ++clones;
  CHECK(clones == forks.size());
  CHECK(flightrec({"verify", "--db", db}).code == 0);

  // rt_sigreturn restores the registers, orig_ax (-1) among them: it is
  // still recorded as rt_sigreturn, never as a call numbered -1.
  std::string db2 = dir.file("signal.db");
  Result s = flightrec({"run", "--policy", "observe", "--entry-times", "off", "--db", db2, "--", "sh", "-c",
                        "trap 'echo caught' USR1; kill -USR1 $$; echo done"});
  INFO(s.err);
  CHECK(s.code == 0);
  CHECK(s.out == "caught\ndone\n");
  auto sig = entries(db2);
  CHECK(find(sig, [](const json& e) { return e.value("name", "") == "rt_sigreturn" && e["nr"] == 15; }));
  for (const json& e : sig)
    if (e.contains("nr")) CHECK_MESSAGE(e["nr"].get<int64_t>() < 1024, e.dump());
}

TEST_CASE("the README example: shell, redirect, cat, exit code") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db"), out = dir.file("x");
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                        "echo hi > " + out + "; cat /etc/hostname; exit 3"});
  CHECK(r.code == 3);
  CHECK(slurp(out) == "hi\n");
  auto all = entries(db);
  CHECK(find(all, [&](const json& e) {
    return e["type"] == "file_open" && e.value("path", "") == out && (e["flags"].get<int>() & O_CREAT);
  }));
  CHECK(find(all, [](const json& e) {
    return e["type"] == "exec" && e["argv"] == json::array({"cat", "/etc/hostname"});
  }));
  CHECK(find(all, [](const json& e) {
    return e["type"] == "file_open" && e.value("path", "") == "/etc/hostname" && e["comm"] == "cat";
  }));
}

TEST_CASE("a process outside the session's cgroup never reaches the record") {
  REQUIRE(is_root());
  TempDir dir;
  std::string marker = dir.file("outsider-marker");
  std::string loop = "while :; do test -e " + marker + "; done";
  Proc outsider = start({"sh", "-c", loop});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  std::string db = dir.file("s.db");
  // The same loop inside the session for a moment: it is recorded, so the
  // absence of the outsider below means the filter, not blindness.
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "timeout", "0.5", "sh", "-c", loop});
  CHECK(r.code == 124);  // timeout's "timed out"
  kill(outsider.pid, SIGKILL);
  wait(outsider);

  auto all = entries(db);
  int inside = 0, outside = 0;
  for (const auto& e : all) {
    if (e.value("path", "") != marker) continue;
    (e["pid"] == outsider.pid ? outside : inside)++;
  }
  CHECK(inside > 10);
  CHECK(outside == 0);
  CHECK_FALSE(find(all, [&](const json& e) { return e["pid"] == outsider.pid; }));
}

TEST_CASE("processes left behind are killed and recorded when the command exits") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  // The shell exits once its child is sleep (has exec'd), not before: a
  // child killed while still a copy of sh would exit as "sh".
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                        "sleep 60 & p=$!; until [ \"$(cat /proc/$p/comm)\" = sleep ]; do :; done; exit 0"});
  CHECK(r.code == 0);
  auto all = entries(db);
  const json* sleep_exit = find(all, [](const json& e) {
    return e["type"] == "exit" && e["comm"] == "sleep" && e["signal"] == SIGKILL;
  });
  CHECK(sleep_exit);
  CHECK(all.back()["reason"] == "command exited; remaining processes killed");
}

TEST_CASE("a ring buffer too small for a syscall storm yields explicit lost entries") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  // 64 KiB holds ~400 records; a million getppid() calls overflow it.
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--ring-size", "64K", "--on-loss", "continue", "--", BENCH_SYSCALLS_BIN, "getppid",
                        "1000000"});
  CHECK(r.code == 0);
  auto all = entries(db);
  auto lost = of_type(all, "lost");
  REQUIRE(!lost.empty());
  uint64_t sum = 0;
  for (const auto& e : lost) {
    uint64_t per_cpu = 0;
    for (const auto& n : e["cpu_lost"]) per_cpu += n.get<uint64_t>();
    CHECK(e["lost"].get<uint64_t>() == per_cpu + e["program_misses"].get<uint64_t>());
    CHECK(e["since_mono_ns"].get<uint64_t>() < e["until_mono_ns"].get<uint64_t>());
    sum += e["lost"].get<uint64_t>();
  }
  CHECK(all.back()["lost_total"] == sum);
  // Every getppid is either recorded or counted as lost.
  uint64_t recorded = 0;
  for (const auto& e : all) recorded += e.value("name", "") == "getppid";
  CHECK(recorded + sum >= 1000000);
  CHECK(recorded < 1000000);
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

// The reader maps the ring's data once; a record that wraps around its
// end is put back together. 3000 opens of paths of every length through
// a 256 KiB ring wrap it a dozen times: each path must arrive exact.
TEST_CASE("records that wrap around the ring's end arrive whole: 3000 paths through a 256 KiB ring") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db");
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--ring-size", "256K", "--", "python3", "-c",
                        "for i in range(3000):\n"
                        "    try: open('/nonexistent-flightrec-wrap/%d-%s' % (i, 'a' * (i % 97)))\n"
                        "    except OSError: pass\n"});
  INFO(r.err);
  CHECK(r.code == 0);
  auto all = entries(db);
  std::map<std::string, int> seen;
  for (const auto& e : all)
    if (e.value("path", "").rfind("/nonexistent-flightrec-wrap/", 0) == 0)
      ++seen[e["path"].get<std::string>()];
  CHECK(seen.size() == 3000);
  for (int i = 0; i < 3000; ++i) {
    std::string path = "/nonexistent-flightrec-wrap/" + std::to_string(i) + "-" + std::string(size_t(i % 97), 'a');
    CAPTURE(path);
    CHECK(seen[path] == 1);
  }
  CHECK(of_type(all, "lost").empty());
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("a shell pipeline: both sides, the pipe, and the redirect are recorded" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db"), out = dir.file("upper");
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                        "cat /etc/hostname | tr a-z A-Z > " + out});
  REQUIRE(r.code == 0);
  auto all = entries(db);
  const json* cat = find(all, [](const json& e) { return e["type"] == "exec" && e["comm"] == "cat"; });
  const json* tr = find(all, [](const json& e) { return e["type"] == "exec" && e["comm"] == "tr"; });
  REQUIRE(cat);
  REQUIRE(tr);
  CHECK((*tr)["argv"] == json::array({"tr", "a-z", "A-Z"}));
  CHECK((*cat)["ppid"] == (*tr)["ppid"]);  // both children of the shell
  CHECK(find(all, [](const json& e) { return e.value("name", "") == "pipe2" && e["comm"] == "sh"; }));
  CHECK(find(all, [&](const json& e) {
    return e["type"] == "file_open" && e.value("path", "") == out && e["pid"] == (*tr)["pid"];
  }));
  // cat's read of the file and tr's write of the result both happened.
  CHECK(find(all, [&](const json& e) {
    return e.value("name", "") == "write" && e["pid"] == (*tr)["pid"] && e["ret"].get<int64_t>() > 0;
  }));
}

TEST_CASE("BPF-LSM hooks record what the kernel resolved, where the kernel allows them" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db"), marker = dir.file("lsm-marker");
  std::ofstream(marker) << "x";
  Listener listener;
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", KNOWN_SYSCALLS_BIN, std::to_string(listener.port), marker});
  REQUIRE(r.code == 7);
  auto all = entries(db);
  bool lsm = false;
  for (const auto& c : all.front()["capture"]) lsm = lsm || c.get<std::string>().rfind("lsm", 0) == 0;
  Result probe = flightrec({"probe"});
  bool probe_says_lsm = probe.out.find("BPF-LSM                                         yes") != std::string::npos;
  CHECK(lsm == probe_says_lsm);  // the record says what could be seen
  auto hooks = of_type(all, "lsm");
  if (!lsm) {
    MESSAGE("BPF-LSM refused by this kernel: the tracepoint fallback alone is recorded");
    CHECK(hooks.empty());
    return;
  }
  CHECK(find(hooks, [&](const json& e) {
    return e["hook"] == "file_open" && e["path"] == marker && e["source"] == "lsm";
  }));
  CHECK(find(hooks, [&](const json& e) {
    return e["hook"] == "bprm_check_security" && e["path"] == "/bin/true";
  }));
  CHECK(find(hooks, [&](const json& e) {
    return e["hook"] == "socket_connect" && e["addr"] == "127.0.0.1" && e["port"] == listener.port;
  }));
  // Signals and privilege use: the shell kills a sleeper it started.
  std::string kdb = dir.file("k.db");
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", kdb, "--", "sh", "-c", "sleep 30 & kill -USR1 $!; wait"}).code == 0);
  auto killed = of_type(entries(kdb), "lsm");
  CHECK(find(killed, [](const json& e) { return e["hook"] == "task_kill" && e["signal"] == SIGUSR1; }));
}

TEST_CASE("LSM file-change hooks load one by one; a refused hook falls back to the tracepoints alone" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db"), a = dir.file("a"), b = dir.file("b");
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                     "echo x > " + a + "; mv " + a + " " + b + "; chmod 600 " + b + "; rm " + b})
              .code == 0);
  auto all = entries(db);
  const json& genesis = all.front();
  auto listed = [&](const char* key, const std::string& section) {
    if (!genesis.contains(key)) return false;
    for (const auto& c : genesis[key])
      if (c == section) return true;
    return false;
  };
  std::string probe = flightrec({"probe"}).out;
  bool lsm = probe.find("BPF-LSM                                         yes") != std::string::npos;
  auto hooks = of_type(all, "lsm");
  // The syscalls are recorded whatever the LSM hooks do.
  CHECK(find(all, [&](const json& e) { return e.value("name", "") == "unlinkat" && e.value("path", "") == b; }));
  CHECK(find(all, [&](const json& e) { return e.value("name", "").rfind("rename", 0) == 0 && e.value("newpath", "") == b; }));
  if (!lsm) {
    CHECK_FALSE(genesis.contains("capture_refused"));
    CHECK(hooks.empty());
    return;
  }
  struct Hook {
    const char* section;
    std::function<bool(const json&)> seen;
  } expected[] = {
      {"lsm/path_unlink", [&](const json& e) { return e["hook"] == "path_unlink" && e["path"] == b; }},
      {"lsm/path_rename",
       [&](const json& e) { return e["hook"] == "path_rename" && e["path"] == a && e["new_path"] == b; }},
      {"lsm/inode_setattr",
       [&](const json& e) { return e["hook"] == "inode_setattr" && e["name"] == "b" && e.value("mode", -1) == 0600; }},
  };
  for (const auto& h : expected) {
    bool attached = listed("capture", h.section), refused = listed("capture_refused", h.section);
    INFO(h.section);
    CHECK(attached != refused);  // exactly one of the two, said in the record
    // ... and by flightrec probe, which loads the programs the same way.
    std::string row = "program " + std::string(h.section);
    size_t at = probe.find(row);
    REQUIRE(at != std::string::npos);
    CHECK(probe.compare(probe.find_first_not_of(' ', at + row.size()), 3, attached ? "yes" : "no ") == 0);
    CHECK(bool(find(hooks, h.seen)) == attached);
    std::string said = std::string(h.section) + (attached ? ": attached" : ": refused by this kernel");
    MESSAGE(said);
  }
}

TEST_CASE("--deny-path: refused with EPERM and recorded where BPF-LSM loads, never run unconfined elsewhere" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string secret = dir.file("secret"), db = dir.file("s.db");
  std::ofstream(secret) << "top secret\n";
  std::ofstream(dir.file("secretly")) << "not covered\n";  // a rule covers a path and below, not a longer name
  REQUIRE(symlink(secret.c_str(), dir.file("link").c_str()) == 0);
  // A rule for a file that appears during the session, named through a
  // symlinked directory and with a trailing slash: it covers the real place.
  mkdir(dir.file("real").c_str(), 0755);
  REQUIRE(symlink(dir.file("real").c_str(), dir.file("alias").c_str()) == 0);
  Result r = flightrec({"run", "--policy", "observe", "--deny-path", secret, "--deny-path", dir.file("alias/later/"),
                        "--db", db, "--", "sh", "-c",
                        "cat " + secret + "; echo rc=$?; cat " + dir.file("link") + "; echo link-rc=$?; cat " +
                            dir.file("secretly") + " && cat /etc/hostname >/dev/null && echo other-ok; echo s > " +
                            dir.file("real/later") + "; echo later-rc=$?; " +
                            // No other paths for the same files while the rules hold.
                            "unshare -U true 2>/dev/null; echo userns-rc=$?; mkdir " + dir.file("m") + "; mount --bind " +
                            dir.file("real") + " " + dir.file("m") + " 2>/dev/null; echo mount-rc=$?; /usr/sbin/chroot " + dir.file("real") + " true 2>/dev/null; "
                            "echo chroot-rc=$?"});
  bool lsm = flightrec({"probe"}).out.find("BPF-LSM                                         yes") != std::string::npos;
  if (!lsm) {
    CHECK(r.code == 125);
    CHECK(r.err.find("cannot be enforced") != std::string::npos);
    CHECK(count_lines(r.err) == 1);
    CHECK(access(db.c_str(), F_OK) != 0);  // no record begun
    return;
  }
  REQUIRE(r.code == 0);
  CHECK(r.out.find("top secret") == std::string::npos);
  CHECK(r.out.find("rc=1") != std::string::npos);
  CHECK(r.out.find("link-rc=1") != std::string::npos);  // the kernel's resolved path, not the name given
  CHECK(r.out.find("not covered") != std::string::npos);
  CHECK(r.out.find("other-ok") != std::string::npos);
  CHECK(r.out.find("later-rc=2") != std::string::npos);  // sh: the redirection failed
  CHECK(r.out.find("userns-rc=1") != std::string::npos);
  CHECK(r.out.find("mount-rc=0") == std::string::npos);
  CHECK(r.out.find("chroot-rc=125") != std::string::npos);  // chroot(1): cannot change root (chroot / would not call chroot(2))
  CHECK(r.err.find("Operation not permitted") != std::string::npos);  // EPERM
  auto all = entries(db);
  CHECK(all.front()["lsm_hidden"] == json::array({secret, dir.file("alias/later")}));
  CHECK(std::count_if(all.begin(), all.end(), [&](const json& e) {
          return e["type"] == "lsm" && e["path"] == secret && e["decision"] == "deny" && e["rule"] == 1 &&
                 e["rule_id"] == "filesystem.hidden";
        }) == 2);  // by name and through the link
  CHECK(find(all, [&](const json& e) {
    return e["type"] == "file_open" && e.value("path", "") == secret && e["err"] == "EPERM";
  }));
  for (const char* hook : {"userns_create", "sb_mount", "path_chroot"}) {
    INFO(hook);
    CHECK(find(all, [&](const json& e) {
      return e["type"] == "lsm" && e["hook"] == hook && e["decision"] == "deny" && e["rule_id"] == "filesystem.view";
    }));
  }
  // Outside the session the same file opens.
  CHECK(slurp(secret) == "top secret\n");
  CHECK(run({"cat", secret}).out == "top secret\n");
}

TEST_CASE("--allow-exec: only files under the allowed paths execute, by their resolved path, where BPF-LSM loads" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("x.db"), copy = dir.file("true-copy"), link = dir.file("true-link");
  REQUIRE(run({"cp", "/usr/bin/true", copy}).code == 0);
  REQUIRE(symlink("/usr/bin/true", link.c_str()) == 0);
  // /usr holds the shell, true and (merged /usr) the ELF interpreter. A copy
  // outside it is refused; a link into it runs; so does nothing fileless.
  std::string script = copy + "; echo copy-rc=$?; " + link + " && echo link-ok; " +
                       "python3 -c 'import os; fd = os.memfd_create(\"x\"); "
                       "os.write(fd, open(\"/usr/bin/true\", \"rb\").read()); "
                       "os.execv(f\"/proc/self/fd/{fd}\", [\"x\"])'; echo memfd-rc=$?";
  Result r = flightrec({"run", "--policy", "observe", "--allow-exec", "/usr", "--db", db, "--", "sh", "-c", script});
  bool lsm = flightrec({"probe"}).out.find("BPF-LSM                                         yes") != std::string::npos;
  if (!lsm) {
    CHECK(r.code == 125);
    CHECK(r.err.find("cannot be enforced") != std::string::npos);
    return;
  }
  REQUIRE(r.code == 0);
  CHECK(r.out.find("copy-rc=126") != std::string::npos);  // sh: found but cannot execute
  CHECK(r.out.find("link-ok") != std::string::npos);
  CHECK(r.out.find("memfd-rc=1") != std::string::npos);  // python: PermissionError
  auto all = entries(db);
  CHECK(all.front()["lsm_exec"] == json::array({"/usr"}));
  auto refused = [&](const std::string& prefix) {
    return find(all, [&](const json& e) {
      return e["type"] == "lsm" && e["hook"] == "file_open" && e["decision"] == "deny" &&
             e["rule_id"] == "filesystem.exec" && e["path"].get<std::string>().rfind(prefix, 0) == 0;
    });
  };
  CHECK(refused(copy));
  CHECK(refused("/memfd:x"));
  CHECK(find(all, [&](const json& e) {
    return e["type"] == "exec" && e.value("filename", "") == link;
  }));
  // A sandbox's policy decides what it executes: the option is refused there.
  Result sandboxed = flightrec({"run", "--allow-exec", "/usr", "--db", dir.file("y.db"), "--", "true"});
  CHECK(sandboxed.code == 2);
  CHECK(sandboxed.err.find("filesystem.exec") != std::string::npos);
}

TEST_CASE("the syscall table is this kernel's: every syscall it has, with the parameters it declares") {
  REQUIRE(is_root());
  // The kernel's own syscall metadata, from a private tracefs mount.
  TempDir dir;
  std::string tracefs = dir.file("tracefs");
  mkdir(tracefs.c_str(), 0700);
  REQUIRE_MESSAGE(rt::run({"mount", "-t", "tracefs", "nodev", tracefs}).code == 0, "tracefs cannot be mounted");
  Result r = rt::run({"python3", SYSCALL_TABLE_TOOL, "--check", "--tracefs", tracefs});
  rt::run({"umount", tracefs});
  INFO(r.err);
  CHECK(r.code == 0);
}

TEST_CASE("the newest path syscalls are recorded with their paths (setxattrat, file_setattr, open_tree_attr...)") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db"), file = dir.file("target");
  std::ofstream(file) << "x";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", NEW_SYSCALLS_BIN, file});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  const std::vector<std::pair<std::string, bool>> calls = {
      {"setxattrat", true}, {"getxattrat", true}, {"listxattrat", false}, {"removexattrat", true},
      {"file_getattr", false}, {"file_setattr", false}, {"open_tree_attr", false}};
  for (const auto& call : calls) {
    const std::string& name = call.first;
    bool has_xattr_name = call.second;
    INFO(name);
    const json* e = find(all, [&](const json& x) { return x.value("name", "") == name; });
    REQUIRE(e);
    CHECK((*e)["path"] == file);
    if (has_xattr_name) CHECK((*e)["xattr_name"] == "user.flightrec");
  }
  // Under agent, open_tree_attr is a mount API like open_tree: denied and named.
  // (The build tree is not readable under agent: the program runs from the work directory.)
  std::filesystem::copy_file(NEW_SYSCALLS_BIN, dir.file("new_syscalls"));
  Result a = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--db", dir.file("a.db"), "--", "./new_syscalls", "target"});
  INFO(a.out << a.err);
  CHECK(a.out.find("open_tree_attr EPERM\n") != std::string::npos);
  bool named = false;
  for (const auto& e : of_type(entries(dir.file("a.db")), "violation"))
    named = named || e["rule_id"] == "seccomp.deny.open_tree_attr";
  CHECK(named);
}

TEST_CASE("a command line past 4 KiB is recorded whole, in exec_argv pieces (up to 1 MiB)") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  // An argument that hides past the first 4 KiB, then a long one past 1 MiB in all.
  std::vector<std::string> args = {"/bin/true", std::string(5000, 'a'), "--the-part-that-matters"};
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", args[0], args[1], args[2]});
  REQUIRE(r.code == 0);
  std::vector<std::string> big = {"/bin/true"};
  for (int i = 0; i < 10; ++i) big.push_back(std::string(120000, char('b' + i)));
  std::vector<std::string> argv = {"run", "--policy", "observe", "--db", db, "--"};
  argv.insert(argv.end(), big.begin(), big.end());
  REQUIRE(rt::flightrec(argv).code == 0);

  // Each exec's argv block, joined from its pieces.
  std::vector<std::pair<int64_t, std::string>> blocks;  // argv_bytes, what the record holds
  for (const auto& e : entries(db)) {
    if (e["type"] == "exec" && e["filename"] == "/bin/true") {
      std::string block;
      for (const auto& a : e["argv"]) block += a.get<std::string>() + '\0';
      block.resize(std::min<size_t>(block.size(), 4096));
      blocks.emplace_back(e["argv_bytes"].get<int64_t>(), block);
    } else if (e["type"] == "exec_argv") {
      REQUIRE(!blocks.empty());
      CHECK(e["offset"].get<size_t>() == blocks.back().second.size());
      blocks.back().second += e["data"].get<std::string>();
    }
  }
  REQUIRE(blocks.size() == 2);
  std::string want;
  for (const auto& a : args) want += a + '\0';
  CHECK(blocks[0].first == int64_t(want.size()));
  CHECK(blocks[0].second == want);
  want.clear();
  for (const auto& a : big) want += a + '\0';
  CHECK(blocks[1].first == int64_t(want.size()));
  CHECK(blocks[1].second.size() == 1u << 20);  // the bound, stated in docs/FORMAT.md
  CHECK(blocks[1].second == want.substr(0, 1u << 20));
}
