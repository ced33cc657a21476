#include "probe/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "common/system.h"

namespace flightrec::probe {
namespace {

bool read_at(int fd, void* buf, size_t len, uint64_t off) { return pread_full(fd, buf, len, off); }

}  // namespace

std::map<std::string, uint64_t> function_offsets(int fd, const std::vector<std::string>& names) {
  std::map<std::string, uint64_t> out;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return out;
  Elf64_Ehdr eh;
  std::vector<Elf64_Shdr> sh;
  if (!read_at(fd, &eh, sizeof(eh), 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shnum > 4096) {
    return out;
  }
  sh.resize(eh.e_shnum);
  if (!read_at(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) {
    return out;
  }
  for (const auto& s : sh) {
    if (s.sh_type != SHT_DYNSYM || s.sh_link >= sh.size() || s.sh_entsize != sizeof(Elf64_Sym)) continue;
    const Elf64_Shdr& strs = sh[s.sh_link];
    if (s.sh_size > (32u << 20) || strs.sh_size > (32u << 20)) break;  // node's are ~1 MB
    std::vector<Elf64_Sym> syms(s.sh_size / sizeof(Elf64_Sym));
    std::string names_blob(strs.sh_size, '\0');
    if (!read_at(fd, syms.data(), syms.size() * sizeof(Elf64_Sym), s.sh_offset) ||
        !read_at(fd, names_blob.data(), names_blob.size(), strs.sh_offset))
      break;
    for (const auto& sym : syms) {
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF || sym.st_shndx >= sh.size() ||
          sym.st_name >= names_blob.size())
        continue;
      std::string name(names_blob.c_str() + sym.st_name);
      name = name.substr(0, name.find('@'));
      for (const auto& want : names) {
        if (name != want) continue;
        const Elf64_Shdr& sec = sh[sym.st_shndx];
        if (sym.st_value >= sec.sh_addr) out[want] = sym.st_value - sec.sh_addr + sec.sh_offset;
      }
    }
    break;
  }
  return out;
}

}  // namespace flightrec::probe
