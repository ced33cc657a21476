#include "probe/go_tls.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "common/system.h"
#include "probe/disasm.h"
#include "flightrec/abi/events.h"

namespace flightrec::probe {
namespace {

constexpr uint64_t kPclntabMax = 128u << 20;  // kubelet's (a 100 MB program) is ~40 MB
constexpr uint64_t kFunctionMax = 1u << 20;   // bytes of one function disassembled at most

bool read_at(int fd, void* buf, size_t len, uint64_t off) { return pread_full(fd, buf, len, off); }

template <typename T>
bool load(std::string_view blob, uint64_t at, T* out) {
  if (at > blob.size() || blob.size() - at < sizeof(T)) return false;
  std::memcpy(out, blob.data() + at, sizeof(T));
  return true;
}

struct Wanted {
  const char* name;
  uint32_t func;
  bool needs_rets;
};
// Read and Write record plaintext; the handshake is only noted at its
// entry (a ClientHello sent inside it is covered: tls_uncaptured).
constexpr Wanted kWanted[] = {
    {"crypto/tls.(*Conn).Read", FR_TLS_GO_READ, true},
    {"crypto/tls.(*Conn).Write", FR_TLS_GO_WRITE, true},
    {"crypto/tls.(*Conn).handshakeContext", FR_TLS_HANDSHAKE, false},
};

// Offsets (from `start`) of the RET instructions in code, up to max + 1.
std::vector<uint64_t> ret_offsets(const Capstone& cap, const std::string& code, uint64_t address, size_t max) {
  std::vector<uint64_t> out;
  csh cs;
  if (cap.open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return out;
  cs_insn* insn = cap.malloc(cs);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(code.data());
  size_t left = code.size();
  uint64_t at = address;
  // Stops at the first byte that is no instruction: Go pads between
  // functions with INT3, and the function's end comes from the table.
  while (out.size() <= max && insn && cap.disasm_iter(cs, &p, &left, &at, insn))
    if (insn->id == X86_INS_RET) out.push_back(insn->address - address);
  if (insn) cap.free(insn, 1);
  cap.close(&cs);
  return out;
}

}  // namespace

std::optional<std::vector<GoTlsFunction>> go_tls_functions(int fd, std::string* why) {
  struct stat st {};
  Elf64_Ehdr eh;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !read_at(fd, &eh, sizeof(eh), 0) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != EM_X86_64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 ||
      eh.e_shstrndx >= eh.e_shnum)
    return std::nullopt;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read_at(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) return std::nullopt;
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  if (names.sh_size > (1u << 20)) return std::nullopt;
  std::string section_names(names.sh_size, '\0');
  if (!read_at(fd, section_names.data(), section_names.size(), names.sh_offset)) return std::nullopt;
  auto section_name = [&](const Elf64_Shdr& s) -> std::string {
    return s.sh_name < section_names.size() ? section_names.c_str() + s.sh_name : "";
  };
  const Elf64_Shdr* pcln = nullptr;
  const Elf64_Shdr* text = nullptr;
  for (const auto& s : sh) {
    if (section_name(s) == ".gopclntab") pcln = &s;
    if (section_name(s) == ".text") text = &s;
  }
  if (!pcln || pcln->sh_type == SHT_NOBITS) return std::nullopt;
  std::vector<GoTlsFunction> out;
  if (pcln->sh_size < 72 || pcln->sh_size > kPclntabMax) {
    *why = "its Go function table is out of bounds";
    return out;
  }
  std::string tab(pcln->sh_size, '\0');
  if (!read_at(fd, tab.data(), tab.size(), pcln->sh_offset)) {
    *why = "its Go function table cannot be read";
    return out;
  }
  // runtime.pcHeader (Go 1.18 and later; 1.20 changed only the magic).
  uint32_t magic = 0;
  uint8_t min_lc = 0, ptr_size = 0;
  uint64_t nfunc = 0, text_start = 0, funcname_off = 0, pcln_off = 0;
  load(tab, 0, &magic);
  load(tab, 6, &min_lc);
  load(tab, 7, &ptr_size);
  load(tab, 8, &nfunc);
  load(tab, 24, &text_start);
  load(tab, 32, &funcname_off);
  load(tab, 64, &pcln_off);
  if (magic != 0xfffffff0 && magic != 0xfffffff1) {
    *why = "a Go program built before Go 1.18 (its function table and calling convention are not probed)";
    return out;
  }
  if (min_lc != 1 || ptr_size != 8 || funcname_off >= tab.size() || pcln_off >= tab.size() ||
      nfunc > (tab.size() - pcln_off) / 8) {
    *why = "its Go function table is malformed";
    return out;
  }
  // A position-independent program's text base is relocated at load;
  // runtime.text is where .text begins then.
  if (text_start == 0 && text) text_start = text->sh_addr;
  const std::string_view functab = std::string_view(tab).substr(pcln_off);  // the function table, then each _func
  const std::string_view funcnames(tab.data() + funcname_off, tab.size() - funcname_off);
  for (uint64_t i = 0; i < nfunc; ++i) {
    uint32_t entry_off, func_off, next_entry_off;
    int32_t name_off;
    if (!load(functab, i * 8, &entry_off) || !load(functab, i * 8 + 4, &func_off) ||
        !load(functab, uint64_t(func_off) + 4, &name_off) || name_off < 0 || uint64_t(name_off) >= funcnames.size())
      continue;
    std::string_view name = funcnames.substr(uint64_t(name_off));
    name = name.substr(0, name.find('\0'));
    const Wanted* want = nullptr;
    for (const auto& w : kWanted)
      if (name == w.name) want = &w;
    if (!want) continue;
    // The table ends with one more entry: the end of the last function.
    if (!load(functab, (i + 1) * 8, &next_entry_off) || next_entry_off <= entry_off) continue;
    uint64_t vaddr = text_start + entry_off, size = next_entry_off - entry_off;
    const Elf64_Shdr* in = nullptr;
    for (const auto& s : sh)
      if ((s.sh_flags & SHF_EXECINSTR) && s.sh_type == SHT_PROGBITS && vaddr >= s.sh_addr &&
          vaddr - s.sh_addr < s.sh_size)
        in = &s;
    if (!in || size > kFunctionMax || size > in->sh_size - (vaddr - in->sh_addr)) continue;
    GoTlsFunction f{want->name, want->func, vaddr - in->sh_addr + in->sh_offset, {}};
    if (want->needs_rets) {
      const Capstone* cap = capstone(why);
      if (!cap) return std::vector<GoTlsFunction>{};  // a Go program that cannot be probed, and why
      std::string code(size, '\0');
      if (!read_at(fd, code.data(), code.size(), f.entry)) continue;
      for (uint64_t r : ret_offsets(*cap, code, vaddr, kGoRetsMax)) f.rets.push_back(f.entry + r);
      if (f.rets.empty()) continue;
      if (f.rets.size() > kGoRetsMax) {
        // Each RET is a uprobe, in kernel memory no cgroup is charged for:
        // a table that points at a sea of RETs is a program made to pin it.
        *why = f.name + " has more than " + std::to_string(kGoRetsMax) +
               " RET instructions (crypto/tls's has a handful): not probed";
        return std::vector<GoTlsFunction>{};
      }
    }
    out.push_back(std::move(f));
  }
  bool read = false, write = false;
  for (const auto& f : out) {
    read |= f.func == FR_TLS_GO_READ;
    write |= f.func == FR_TLS_GO_WRITE;
  }
  if (!read || !write) {
    *why = "a Go program without crypto/tls's Conn.Read and Conn.Write";
    out.clear();
  }
  return out;
}

}  // namespace flightrec::probe
