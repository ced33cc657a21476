// The x86_64 syscall table: names by number, and which arguments of each
// syscall are strings or socket addresses to read (the map the BPF side
// consults; see include/flightrec/abi/events.h). One table for the decoder
// and the policy checker, generated from the kernel's own syscall metadata
// (tools/gen-syscall-table.py).
#include "events/syscall_table.h"

#include <array>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace flightrec::events {

// The table (vmlinux/syscalls_x86_64.txt, built in by embed_text.cmake):
// "NR NAME ARGS" lines, ARGS the kernel's own parameter declarations.
extern const char kSyscallTableText[];

namespace {

constexpr uint8_t N = FR_ARG_NONE;

// The record's name for a string parameter of a syscall, from the kernel's
// parameter name; nullptr for strings not read (buffers that are not
// NUL-terminated, key material, module arguments).
const char* string_field(std::string_view call, std::string_view param) {
  if (param == "filename" || param == "pathname" || param == "path" || param == "specialfile" ||
      param == "special" || param == "library")
    return "path";
  if (param == "name") {
    if (call.find("xattr") != std::string_view::npos) return "xattr_name";
    if (call == "acct" || call == "umount2" || call == "name_to_handle_at") return "path";
    return nullptr;  // sethostname, setdomainname: not NUL-terminated
  }
  bool symlink = call.starts_with("symlink");
  if (param == "oldname") return symlink ? "target" : "oldpath";
  if (param == "newname") return symlink ? "linkpath" : "newpath";
  if (param == "from_pathname") return "from_path";
  if (param == "to_pathname") return "to_path";
  if (param == "new_root") return "new_root";
  if (param == "put_old") return "put_old";
  if (param == "dev_name") return "mount_source";
  if (param == "dir_name") return "target";
  if (param == "_fs_name") return "fstype";
  if (param == "uname") return "memfd_name";
  if (param == "u_name") return "mq_name";
  return nullptr;
}

// Syscalls that carry a socket address: which argument, its length
// argument, and how to read it (their types alone do not say).
struct SockaddrRow {
  const char* name;
  uint8_t sa, sa_len, sa_mode;
};
constexpr SockaddrRow kSockaddrRows[] = {
    {"connect", 1, 2, FR_SA_IN},   {"bind", 1, 2, FR_SA_IN},         {"sendto", 4, 5, FR_SA_IN},
    {"accept", 1, 2, FR_SA_OUT},   {"accept4", 1, 2, FR_SA_OUT},     {"recvfrom", 4, 5, FR_SA_OUT},
    {"getsockname", 1, 2, FR_SA_OUT}, {"getpeername", 1, 2, FR_SA_OUT},
    {"sendmsg", 1, N, FR_SA_MSG},  // the msghdr's msg_name
    {"sendmmsg", 1, N, FR_SA_MSG}, // the first message's
};

struct Table {
  std::array<SyscallInfo, FR_SYSCALL_TABLE_SIZE> info{};
  std::vector<std::string> names;  // storage for info[].name
  Table() {
    for (auto& s : info) s.spec = {{N, N}, N, N, FR_SA_NONE, {0, 0, 0}};
    std::istringstream in(kSyscallTableText);
    std::string line;
    std::vector<std::pair<uint32_t, std::string>> rows;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      size_t a = line.find(' '), b = line.find(' ', a + 1);
      uint32_t nr = uint32_t(std::stoul(line.substr(0, a)));
      if (nr >= info.size() || b == std::string::npos) throw std::logic_error("syscall table line: " + line);
      rows.emplace_back(nr, line.substr(a + 1, b - a - 1));
      fill_strings(info[nr], rows.back().second, line.substr(b + 1));
    }
    names.reserve(rows.size());  // no reallocation: info[].name points into it
    for (const auto& [nr, name] : rows) info[nr].name = names.emplace_back(name).c_str();
    for (const auto& r : kSockaddrRows)
      for (const auto& [nr, name] : rows)
        if (name == r.name) {
          info[nr].spec.sockaddr_arg = r.sa;
          info[nr].spec.sockaddr_len_arg = r.sa_len;
          info[nr].spec.sockaddr_mode = r.sa_mode;
        }
  }

  // The first two string parameters the record reads ("const char * filename; int flags").
  static void fill_strings(SyscallInfo& s, std::string_view call, std::string_view args) {
    int found = 0;
    for (uint8_t index = 0; !args.empty() && found < 2 && index < 6; ++index) {
      size_t end = args.find("; ");
      std::string_view decl = args.substr(0, end);
      args = end == std::string_view::npos ? std::string_view() : args.substr(end + 2);
      size_t space = decl.rfind(' ');
      if (space == std::string_view::npos) continue;
      std::string_view type = decl.substr(0, space), param = decl.substr(space + 1);
      if (type != "const char *" && type != "char *") continue;
      if (const char* field = string_field(call, param)) {
        s.spec.str_arg[found] = index;
        s.str_name[found] = field;
        ++found;
      }
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const SyscallInfo* syscall_info(uint32_t nr) {
  return nr < FR_SYSCALL_TABLE_SIZE ? &table().info[nr] : nullptr;
}

std::optional<uint32_t> syscall_number(std::string_view name) {
  const Table& t = table();
  for (uint32_t nr = 0; nr < t.info.size(); ++nr)
    if (t.info[nr].name && name == t.info[nr].name) return nr;
  return std::nullopt;
}

}  // namespace flightrec::events
