#include "probe/core_btf.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <linux/btf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "common/system.h"
#include "probe/btf_scan.h"

namespace flightrec::probe {
namespace {

constexpr uint32_t kKindDeclTag = 17, kKindTypeTag = 18, kKindEnum64 = 19;
constexpr uint32_t kRelocTypeIdTarget = 7;  // BPF_CORE_TYPE_ID_TARGET: the kernel's id of a type

struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

template <typename T>
bool read_at(Bytes b, uint64_t off, T* out) {
  if (off > b.size || b.size - off < sizeof(T)) return false;
  memcpy(out, b.data + off, sizeof(T));
  return true;
}

// The named section of an ELF64 object, when it lies inside the object.
std::optional<Bytes> elf_section(Bytes elf, std::string_view name) {
  Elf64_Ehdr eh;
  if (!read_at(elf, 0, &eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr))
    return std::nullopt;
  Elf64_Shdr names;
  if (!read_at(elf, eh.e_shoff + uint64_t(eh.e_shstrndx) * sizeof(Elf64_Shdr), &names) ||
      names.sh_offset > elf.size || names.sh_size > elf.size - names.sh_offset)
    return std::nullopt;
  for (uint32_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    if (!read_at(elf, eh.e_shoff + uint64_t(i) * sizeof(sh), &sh)) return std::nullopt;
    if (sh.sh_name >= names.sh_size || sh.sh_offset > elf.size || sh.sh_size > elf.size - sh.sh_offset) continue;
    const char* n = reinterpret_cast<const char*>(elf.data + names.sh_offset + sh.sh_name);
    if (std::string_view(n, strnlen(n, names.sh_size - sh.sh_name)) == name)
      return Bytes{elf.data + sh.sh_offset, size_t(sh.sh_size)};
  }
  return std::nullopt;
}

// A BTF blob read in place: types by id, names by offset, every offset
// checked against the blob.
class RawBtf {
 public:
  bool parse(Bytes b, std::string* why) {
    btf_header h;
    if (!read_at(b, 0, &h) || h.magic != BTF_MAGIC || h.hdr_len < sizeof(h) || h.hdr_len > b.size)
      return fail(why, "not native-endian BTF");
    if (h.hdr_len % 4 || h.type_off % 4 || h.type_len % 4 || uintptr_t(b.data) % 4)
      return fail(why, "BTF types not 4-byte aligned");
    Bytes body{b.data + h.hdr_len, b.size - h.hdr_len};
    if (h.type_off > body.size || h.type_len > body.size - h.type_off || h.str_off > body.size ||
        h.str_len > body.size - h.str_off || h.str_len == 0 || body.data[h.str_off + h.str_len - 1] != 0)
      return fail(why, "BTF sections out of bounds");
    types_ = {body.data + h.type_off, h.type_len};
    strs_ = {body.data + h.str_off, h.str_len};
    offsets_.assign(1, 0);  // id 0 is void
    for (uint64_t off = 0; off < types_.size;) {
      btf_type t;
      if (!read_at(types_, off, &t)) return fail(why, "BTF type cut short");
      auto extra = btf_trailing_bytes(BTF_INFO_KIND(t.info), BTF_INFO_VLEN(t.info));
      if (!extra) return fail(why, "BTF type of unknown kind " + std::to_string(BTF_INFO_KIND(t.info)));
      if (*extra > types_.size - off - sizeof(t)) return fail(why, "BTF type cut short");
      offsets_.push_back(uint32_t(off));
      off += sizeof(t) + *extra;
    }
    return true;
  }

  uint32_t count() const { return uint32_t(offsets_.size()); }
  bool valid(uint32_t id) const { return id > 0 && id < count(); }
  const btf_type* type(uint32_t id) const { return reinterpret_cast<const btf_type*>(types_.data + offsets_[id]); }
  const uint8_t* raw(uint32_t id) const { return types_.data + offsets_[id]; }
  size_t raw_size(uint32_t id) const {
    const btf_type* t = type(id);
    return sizeof(btf_type) + *btf_trailing_bytes(BTF_INFO_KIND(t->info), BTF_INFO_VLEN(t->info));
  }
  uint32_t kind(uint32_t id) const { return BTF_INFO_KIND(type(id)->info); }
  std::string_view name(uint32_t off) const {
    if (off >= strs_.size) return {};
    const char* s = reinterpret_cast<const char*>(strs_.data + off);
    return {s, strnlen(s, strs_.size - off)};
  }

 private:
  static bool fail(std::string* why, std::string text) {
    *why = std::move(text);
    return false;
  }
  Bytes types_, strs_;
  std::vector<uint32_t> offsets_;  // by id: where the type starts in the type section
};

// libbpf's bpf_core_essential_name_len: a name without its last
// "X___Y" flavour suffix.
std::string_view essential_name(std::string_view n) {
  for (ptrdiff_t i = ptrdiff_t(n.size()) - 5; i >= 0; --i)
    if (n[i] != '_' && n[i + 1] == '_' && n[i + 2] == '_' && n[i + 3] == '_' && n[i + 4] != '_')
      return n.substr(0, size_t(i) + 1);
  return n;
}

// The local type ids the object's CO-RE relocations start from (.BTF.ext's
// core_relo records); false when the section is malformed or asks for a
// kernel type id.
bool relocation_roots(Bytes ext, std::vector<uint32_t>* roots, std::string* why) {
  struct {
    uint16_t magic;
    uint8_t version, flags;
    uint32_t hdr_len, func_info_off, func_info_len, line_info_off, line_info_len, core_relo_off, core_relo_len;
  } h{};
  if (!read_at(ext, 0, &h.magic) || h.magic != BTF_MAGIC || !read_at(ext, 4, &h.hdr_len)) {
    *why = ".BTF.ext is malformed";
    return false;
  }
  if (h.hdr_len < sizeof(h)) return true;  // no CO-RE relocations
  read_at(ext, 0, &h);
  uint64_t at = uint64_t(h.hdr_len) + h.core_relo_off, end = at + h.core_relo_len;
  uint32_t rec_size = 0;
  if (end > ext.size || (h.core_relo_len > 0 && (!read_at(ext, at, &rec_size) || rec_size < 16))) {
    *why = ".BTF.ext's CO-RE relocations are malformed";
    return false;
  }
  if (h.core_relo_len == 0) return true;
  for (at += 4; at < end;) {
    uint32_t section[2];  // name, record count
    if (end - at < sizeof(section) || !read_at(ext, at, &section)) break;
    at += sizeof(section);
    if (uint64_t(section[1]) * rec_size > end - at) break;
    for (uint32_t i = 0; i < section[1]; ++i, at += rec_size) {
      uint32_t relo[4];  // insn_off, type_id, access_str_off, kind
      read_at(ext, at, &relo);
      if (relo[3] == kRelocTypeIdTarget) {
        *why = "the BPF object asks for kernel type ids";
        return false;
      }
      roots->push_back(relo[1]);
    }
  }
  if (at != end) {
    *why = ".BTF.ext's CO-RE relocations are malformed";
    return false;
  }
  return true;
}

// Calls `f(uint32_t& id)` on every type id a type record refers to.
template <typename F>
void for_each_ref(uint8_t* rec, F&& f) {
  auto* t = reinterpret_cast<btf_type*>(rec);
  uint8_t* extra = rec + sizeof(btf_type);
  uint32_t vlen = BTF_INFO_VLEN(t->info);
  switch (BTF_INFO_KIND(t->info)) {
    case BTF_KIND_PTR: case BTF_KIND_CONST: case BTF_KIND_VOLATILE: case BTF_KIND_RESTRICT:
    case BTF_KIND_TYPEDEF: case BTF_KIND_FUNC: case BTF_KIND_VAR: case kKindDeclTag: case kKindTypeTag:
      f(t->type);
      break;
    case BTF_KIND_ARRAY: {
      auto* a = reinterpret_cast<btf_array*>(extra);
      f(a->type);
      f(a->index_type);
      break;
    }
    case BTF_KIND_STRUCT: case BTF_KIND_UNION:
      for (uint32_t i = 0; i < vlen; ++i) f(reinterpret_cast<btf_member*>(extra)[i].type);
      break;
    case BTF_KIND_FUNC_PROTO:
      f(t->type);
      for (uint32_t i = 0; i < vlen; ++i) f(reinterpret_cast<btf_param*>(extra)[i].type);
      break;
    case BTF_KIND_DATASEC:
      for (uint32_t i = 0; i < vlen; ++i) f(reinterpret_cast<btf_var_secinfo*>(extra)[i].type);
      break;
    default:
      break;
  }
}

// Calls `f(uint32_t& name_off)` on every string offset in a type record.
template <typename F>
void for_each_name(uint8_t* rec, F&& f) {
  auto* t = reinterpret_cast<btf_type*>(rec);
  uint8_t* extra = rec + sizeof(btf_type);
  uint32_t vlen = BTF_INFO_VLEN(t->info);
  f(t->name_off);
  switch (BTF_INFO_KIND(t->info)) {
    case BTF_KIND_STRUCT: case BTF_KIND_UNION:
      for (uint32_t i = 0; i < vlen; ++i) f(reinterpret_cast<btf_member*>(extra)[i].name_off);
      break;
    case BTF_KIND_ENUM:
      for (uint32_t i = 0; i < vlen; ++i) f(reinterpret_cast<btf_enum*>(extra)[i].name_off);
      break;
    case kKindEnum64:
      for (uint32_t i = 0; i < vlen; ++i) f(reinterpret_cast<uint32_t*>(extra + 12 * i)[0]);
      break;
    case BTF_KIND_FUNC_PROTO:
      for (uint32_t i = 0; i < vlen; ++i) f(reinterpret_cast<btf_param*>(extra)[i].name_off);
      break;
    default:
      break;
  }
}

bool is_modifier(uint32_t kind) {
  return kind == BTF_KIND_CONST || kind == BTF_KIND_VOLATILE || kind == BTF_KIND_RESTRICT ||
         kind == BTF_KIND_TYPEDEF || kind == kKindTypeTag;
}

// Which kernel types go into the cut, and with which ids.
class Cut {
 public:
  explicit Cut(const RawBtf& btf) : btf_(btf), id_(btf.count(), 0) {}

  bool take(uint32_t id, std::string* why) {
    if (!btf_.valid(id)) return fail(why, id);
    if (!id_[id]) {
      id_[id] = next_id();
      order_.push_back({id, false});
      pending_.push_back(id);
    }
    return true;
  }

  // Everything the taken types hold by value; named structs and unions
  // behind pointers as stubs unless taken on their own.
  bool close(std::string* why) {
    while (!pending_.empty()) {
      uint32_t id = pending_.back();
      pending_.pop_back();
      std::vector<uint8_t> rec(btf_.raw(id), btf_.raw(id) + btf_.raw_size(id));
      bool pointer = btf_.kind(id) == BTF_KIND_PTR;
      bool ok = true;
      for_each_ref(rec.data(), [&](uint32_t& ref) {
        if (!ok || ref == 0) return;
        if (!btf_.valid(ref)) {
          ok = fail(why, ref);
          return;
        }
        if (pointer) {
          auto behind = pointee(ref, why);
          if (!behind) {
            ok = false;
            return;
          }
          if (*behind && !id_[*behind] && !id_[ref]) {
            stub(*behind);
            return;
          }
        }
        ok = take(ref, why);
      });
      if (!ok) return false;
    }
    return true;
  }

  // The cut as raw BTF, every id and name renumbered.
  std::vector<uint8_t> write() const {
    std::vector<uint8_t> types;
    std::string strs(1, '\0');
    std::unordered_map<std::string_view, uint32_t> str_off;
    auto add_str = [&](uint32_t& off) {
      std::string_view s = btf_.name(off);
      if (s.empty()) {
        off = 0;
        return;
      }
      auto [it, added] = str_off.emplace(s, uint32_t(strs.size()));
      if (added) strs.append(s).push_back('\0');
      off = it->second;
    };
    for (const auto& [id, is_stub] : order_) {
      std::vector<uint8_t> rec;
      if (is_stub) {
        btf_type t = *btf_.type(id);
        t.info = btf_.kind(id) << 24;  // no members, kind_flag 0
        rec.assign(reinterpret_cast<uint8_t*>(&t), reinterpret_cast<uint8_t*>(&t) + sizeof(t));
      } else {
        rec.assign(btf_.raw(id), btf_.raw(id) + btf_.raw_size(id));
        bool pointer = btf_.kind(id) == BTF_KIND_PTR;
        for_each_ref(rec.data(), [&](uint32_t& ref) {
          if (ref == 0) return;
          if (pointer && !id_[ref]) ref = stub_.at(*pointee(ref, nullptr));
          else ref = id_[ref];
        });
      }
      for_each_name(rec.data(), add_str);
      types.insert(types.end(), rec.begin(), rec.end());
    }
    btf_header h{};
    h.magic = BTF_MAGIC;
    h.version = BTF_VERSION;
    h.hdr_len = sizeof(h);
    h.type_len = uint32_t(types.size());
    h.str_off = h.type_len;
    h.str_len = uint32_t(strs.size());
    std::vector<uint8_t> out(reinterpret_cast<uint8_t*>(&h), reinterpret_cast<uint8_t*>(&h) + sizeof(h));
    out.insert(out.end(), types.begin(), types.end());
    out.insert(out.end(), strs.begin(), strs.end());
    return out;
  }

 private:
  static bool fail(std::string* why, uint32_t id) {
    if (why) *why = "BTF type id " + std::to_string(id) + " out of range";
    return false;
  }
  uint32_t next_id() const { return uint32_t(order_.size()) + 1; }

  // The struct or union a pointer's target names through typedefs and
  // modifiers, 0 when it names something else; nullopt on a bad id.
  std::optional<uint32_t> pointee(uint32_t ref, std::string* why) const {
    for (int depth = 0; depth < 32 && btf_.valid(ref); ++depth) {
      uint32_t kind = btf_.kind(ref);
      if (kind == BTF_KIND_STRUCT || kind == BTF_KIND_UNION) return ref;
      if (!is_modifier(kind)) return 0;
      ref = btf_.type(ref)->type;
      if (ref == 0) return 0;
    }
    fail(why, ref);
    return std::nullopt;
  }

  void stub(uint32_t id) {
    if (stub_.count(id)) return;
    stub_[id] = next_id();
    order_.push_back({id, true});
  }

  const RawBtf& btf_;
  std::vector<uint32_t> id_;                  // kernel id -> id in the cut (0: not taken whole)
  std::unordered_map<uint32_t, uint32_t> stub_;  // kernel id -> its stub's id in the cut
  std::vector<std::pair<uint32_t, bool>> order_;  // the cut's types in id order: kernel id, stub?
  std::vector<uint32_t> pending_;
};

}  // namespace

std::vector<uint8_t> cut_kernel_btf(const uint8_t* object, size_t object_size, const uint8_t* kernel,
                                    size_t kernel_size, std::string* why, std::vector<std::string>* missing) {
  Bytes obj{object, object_size};
  auto local_raw = elf_section(obj, ".BTF");
  auto ext = elf_section(obj, ".BTF.ext");
  if (!local_raw || !ext) {
    *why = "the BPF object has no .BTF or .BTF.ext section";
    return {};
  }
  // An object embedded in a binary (a skeleton's string) need not be
  // aligned; RawBtf reads its types in place.
  std::vector<uint32_t> local_copy((local_raw->size + 3) / 4);
  memcpy(local_copy.data(), local_raw->data, local_raw->size);
  Bytes local_bytes{reinterpret_cast<const uint8_t*>(local_copy.data()), local_raw->size};
  RawBtf local, target;
  std::vector<uint32_t> roots;
  if (!local.parse(local_bytes, why) || !relocation_roots(*ext, &roots, why) ||
      !target.parse(Bytes{kernel, kernel_size}, why))
    return {};
  if (roots.empty()) {
    *why = "the BPF object has no CO-RE relocations";
    return {};
  }

  // Root names, with the kinds (as bits) relocations want them in and the
  // kinds the kernel has them in: libbpf matches kinds, enum and enum64
  // alike.
  auto kind_bit = [](uint32_t kind) { return 1u << (kind == kKindEnum64 ? uint32_t(BTF_KIND_ENUM) : kind); };
  struct Kinds {
    uint32_t wanted = 0, found = 0;
  };
  std::unordered_map<std::string_view, Kinds> names;
  for (uint32_t id : roots) {
    if (!local.valid(id)) {
      *why = "a CO-RE relocation names local type " + std::to_string(id) + ", which is out of range";
      return {};
    }
    std::string_view name = essential_name(local.name(local.type(id)->name_off));
    if (!name.empty()) names[name].wanted |= kind_bit(local.kind(id));
  }
  // Lengths of the names, to skip hashing most kernel names.
  std::vector<bool> lengths;
  for (const auto& [name, kinds] : names) {
    if (lengths.size() <= name.size()) lengths.resize(name.size() + 1);
    lengths[name.size()] = true;
  }

  Cut cut(target);
  for (uint32_t id = 1; id < target.count(); ++id) {
    switch (target.kind(id)) {
      case BTF_KIND_INT: case BTF_KIND_STRUCT: case BTF_KIND_UNION: case BTF_KIND_ENUM: case kKindEnum64:
      case BTF_KIND_FWD: case BTF_KIND_TYPEDEF: case BTF_KIND_FLOAT:
        break;
      default:
        continue;
    }
    std::string_view name = target.name(target.type(id)->name_off);
    if (name.empty()) continue;
    name = essential_name(name);
    if (name.size() >= lengths.size() || !lengths[name.size()]) continue;
    auto it = names.find(name);
    if (it == names.end()) continue;
    it->second.found |= kind_bit(target.kind(id));
    if (!cut.take(id, why)) return {};
  }
  if (missing)
    for (const auto& [name, kinds] : names)
      if (kinds.wanted & ~kinds.found) missing->emplace_back(name);
  if (!cut.close(why)) return {};
  return cut.write();
}

namespace {

// The module whose BTF holds one of `names` as a string, if any: a module
// type libbpf would relocate against when the kernel's own BTF lacks it.
// (A member's name matches too; that only costs the cut.)
std::optional<std::string> module_with_any(const std::vector<std::string>& names) {
  DIR* dir = opendir("/sys/kernel/btf");
  if (!dir) return std::nullopt;
  std::optional<std::string> found;
  while (dirent* e = readdir(dir)) {
    std::string module = e->d_name;
    if (module == "." || module == ".." || module == "vmlinux") continue;
    auto data = try_read_file("/sys/kernel/btf/" + module);
    if (!data) continue;
    for (const auto& name : names)
      if (data->find(std::string(1, '\0') + name + '\0') != std::string::npos) found = module + " (" + name + ")";
    if (found) break;
  }
  closedir(dir);
  return found;
}

}  // namespace

int kernel_btf_cut_fd(const uint8_t* object, size_t object_size, std::string* why) {
  const char* path = "/sys/kernel/btf/vmlinux";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st{};
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
    *why = errno_message(std::string("cannot read ") + path, fd >= 0 && st.st_size <= 0 ? EIO : errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  // Linux 6.16 and later map the kernel's BTF read-only: no copy.
  size_t size = size_t(st.st_size);
  std::vector<uint8_t> copy;
  const uint8_t* kernel = nullptr;
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map != MAP_FAILED) {
    kernel = static_cast<const uint8_t*>(map);
  } else {
    copy.resize(size);
    if (!pread_full(fd, copy.data(), size, 0)) {
      *why = errno_message(std::string("cannot read ") + path, errno ? errno : EIO);
      close(fd);
      return -1;
    }
    kernel = copy.data();
  }
  close(fd);
  std::vector<std::string> missing;
  std::vector<uint8_t> cut = cut_kernel_btf(object, object_size, kernel, size, why, &missing);
  if (map != MAP_FAILED) munmap(map, size);
  if (cut.empty()) return -1;
  if (!missing.empty())
    if (auto module = module_with_any(missing)) {
      *why = "the kernel's own BTF lacks a type the programs relocate against, and module " + *module + " may have it";
      return -1;
    }
  int out = memfd_create("flightrec-core-btf", MFD_CLOEXEC);
  ssize_t wrote = out < 0 ? -1 : write(out, cut.data(), cut.size());
  if (wrote != ssize_t(cut.size())) {
    *why = errno_message("cannot write the kernel's BTF cut to a memfd", wrote < 0 ? errno : EIO);
    if (out >= 0) close(out);
    return -1;
  }
  return out;
}

}  // namespace flightrec::probe
