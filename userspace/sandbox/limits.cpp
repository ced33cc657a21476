#include "sandbox/limits.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "common/error.h"
#include "common/system.h"
#include "sandbox/cgroup.h"

namespace flightrec::sandbox {
namespace {

bool v2_has(const std::string& dir, const std::string& controller) {
  std::istringstream in(try_read_file(dir + "/cgroup.controllers").value_or(""));
  std::string c;
  while (in >> c)
    if (c == controller) return true;
  return false;
}

// The v1 hierarchy that has this controller mounted, from mountinfo.
std::string v1_mount(const std::string& controller) {
  std::istringstream in(try_read_file("/proc/self/mountinfo").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    size_t dash = line.find(" - cgroup ");
    if (dash == std::string::npos) continue;
    std::istringstream fields(line);
    std::string id, parent, devno, root, mount_point;
    fields >> id >> parent >> devno >> root >> mount_point;
    std::istringstream opts(line.substr(dash + 10));
    std::string source, super;
    opts >> source >> super;
    std::stringstream list(super);
    std::string opt;
    while (std::getline(list, opt, ','))
      if (opt == controller) return mount_point;
  }
  return {};
}

uint64_t stat_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

}  // namespace

ResourceLimits::ResourceLimits(const policy::Limits& l, const std::string& v2_dir, const std::string& name) {
  struct Want {
    const char* controller;
    bool wanted;
  } wants[] = {{"memory", l.memory_bytes > 0}, {"pids", l.pids > 0}, {"cpu", l.cpu_millicores > 0}};
  // The v2 directories from the hierarchy's root down to the session's
  // parent: a controller reaches the session only if each enables it for
  // its children (on a host without systemd, not even the root does).
  std::string root = cgroup2_root();
  std::vector<std::string> ancestors;
  for (std::string d = v2_dir.substr(0, v2_dir.rfind('/')); d.size() >= root.size(); d = d.substr(0, d.rfind('/'))) {
    ancestors.insert(ancestors.begin(), d);
    if (d == root) break;
  }
  for (const auto& w : wants) {
    if (!w.wanted) continue;
    Controller c{w.controller, v2_dir, false};
    for (const auto& a : ancestors) {
      if (!v2_has(a, w.controller)) break;
      try {
        write_file(a + "/cgroup.subtree_control", std::string("+") + w.controller);
      } catch (const Error&) {
        break;  // e.g. a parent with processes of its own: v1 or nothing
      }
    }
    if (!v2_has(v2_dir, w.controller)) {
      std::string mount = v1_mount(w.controller);
      if (mount.empty())
        throw Error(std::string("cannot limit ") + w.controller + ": no cgroup v2 or v1 " + w.controller + " controller");
      std::string base = mount + "/flightrec";
      if (mkdir(base.c_str(), 0755) != 0 && errno != EEXIST) throw Error(errno_message("cannot create " + base, errno));
      c.dir = base + "/" + name;
      if (mkdir(c.dir.c_str(), 0755) != 0) throw Error(errno_message("cannot create " + c.dir, errno));
      c.v1 = true;
    }
    controllers_.push_back(c);
    const std::string& d = controllers_.back().dir;
    if (c.name == "memory") {
      if (c.v1) {
        write_file(d + "/memory.limit_in_bytes", std::to_string(l.memory_bytes));
      } else {
        write_file(d + "/memory.max", std::to_string(l.memory_bytes));
        try {
          write_file(d + "/memory.swap.max", "0");
        } catch (const Error&) {  // no swap accounting on this host: nothing can swap past memory.max to refuse
        }
      }
    } else if (c.name == "pids") {
      write_file(d + "/pids.max", std::to_string(l.pids));
    } else {
      // 100 ms periods; quota in microseconds per period.
      uint64_t quota = l.cpu_millicores * 100;
      if (c.v1) {
        write_file(d + "/cpu.cfs_period_us", "100000");
        write_file(d + "/cpu.cfs_quota_us", std::to_string(quota));
      } else {
        write_file(d + "/cpu.max", std::to_string(quota) + " 100000");
      }
    }
  }
}

ResourceLimits::~ResourceLimits() { remove(); }

std::vector<std::string> ResourceLimits::v1_task_files() const {
  std::vector<std::string> out;
  for (const auto& c : controllers_)
    if (c.v1) out.push_back(c.dir + "/tasks");
  return out;
}

LimitCounters ResourceLimits::read() const {
  LimitCounters out;
  for (const auto& c : controllers_) {
    if (c.name == "memory") {
      out.oom_kills = c.v1 ? stat_value(try_read_file(c.dir + "/memory.oom_control").value_or(""), "oom_kill")
                           : stat_value(try_read_file(c.dir + "/memory.events").value_or(""), "oom_kill");
    } else if (c.name == "pids") {
      out.pids_refused = stat_value(try_read_file(c.dir + "/pids.events").value_or(""), "max");
    }
  }
  return out;
}

std::vector<std::string> ResourceLimits::describe() const {
  std::vector<std::string> out;
  for (const auto& c : controllers_) out.push_back(c.name + (c.v1 ? ":v1" : ":v2"));
  return out;
}

void ResourceLimits::remove() {
  for (const auto& c : controllers_)
    if (c.v1) rmdir(c.dir.c_str());
  controllers_.clear();
}

}  // namespace flightrec::sandbox
