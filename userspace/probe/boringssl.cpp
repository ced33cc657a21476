#include "probe/boringssl.h"

#include <elf.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>

#include "common/system.h"
#include "flightrec/abi/events.h"
#include "probe/disasm.h"

namespace flightrec::probe {
namespace {

// Reasons of BoringSSL's include/openssl/ssl.h and err.h (the public API).
constexpr uint32_t kErrLibSsl = 16;
constexpr uint32_t kShouldNotHaveBeenCalled = 66;
constexpr uint32_t kBadHelloRequest = 110;
constexpr uint32_t kBadLength = 111;
constexpr uint32_t kConnectionTypeNotSet = 134;
constexpr uint32_t kNoRenegotiation = 182;
constexpr uint32_t kSslHandshakeFailure = 215;
constexpr uint32_t kUninitialized = 226;

constexpr std::string_view kFileSuffix = "ssl/ssl_lib.cc";

// Reasons of include/openssl/cipher.h (the same in aws-lc and BoringSSL).
constexpr uint32_t kErrLibCipher = 30;
constexpr uint32_t kBadDecrypt = 101;
constexpr uint32_t kBufferTooSmall = 103;
constexpr uint32_t kCtrlNotImplemented = 104;
constexpr uint32_t kInvalidOperation = 112;
constexpr uint32_t kOutputAliasesInput = 115;
constexpr uint32_t kTooLarge = 117;
constexpr size_t kFileStringsMax = 8;
constexpr size_t kSitesMax = 256;  // Bun's ssl_lib.cc has 31 (its functions are read: bounded work)
constexpr uint64_t kSiteFromStartMax = 16 << 10;  // SSL_write is ~0.4 KiB
constexpr uint64_t kFunctionMax = 32 << 10;
constexpr size_t kChunk = 4 << 20;
constexpr uint64_t kSectionMax = 1ull << 30;

struct Section {
  uint64_t addr, offset, size;
  bool exec;
};

// How code loads an address: an immediate in a program at a fixed address
// (non-PIC code), relative to rip elsewhere (and in PIC code linked into
// a fixed-address program, looked for where the first finds nothing).
enum class Addressing { absolute, rip_relative };

struct Function {
  uint64_t start = 0, end = 0;
  std::set<uint32_t> reasons;
  std::set<uint64_t> calls;
};

bool read_at(int fd, void* buf, size_t len, uint64_t off) { return pread_full(fd, buf, len, off); }

std::optional<std::vector<Section>> sections(int fd, bool* fixed_address) {
  struct stat st {};
  Elf64_Ehdr eh;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !read_at(fd, &eh, sizeof(eh), 0) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != EM_X86_64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096)
    return std::nullopt;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read_at(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) return std::nullopt;
  *fixed_address = eh.e_type == ET_EXEC;
  std::vector<Section> out;
  for (const auto& s : sh) {
    // Code, and constant data (where the file names are); never what the
    // program writes (Bun's 236 MB of bundled JavaScript).
    if (s.sh_type != SHT_PROGBITS || !(s.sh_flags & SHF_ALLOC) || (s.sh_flags & SHF_WRITE) || s.sh_size == 0 ||
        s.sh_size > kSectionMax || s.sh_offset > uint64_t(st.st_size) || s.sh_size > uint64_t(st.st_size) - s.sh_offset ||
        s.sh_addr > UINT64_MAX - s.sh_size)
      continue;
    out.push_back({s.sh_addr, s.sh_offset, s.sh_size, bool(s.sh_flags & SHF_EXECINSTR)});
  }
  return out;
}

// Calls f(address, bytes) over a section in chunks that overlap by
// `overlap` bytes, so a pattern that long is never cut.
template <typename F>
bool each_chunk(int fd, const Section& s, size_t overlap, F&& f) {
  std::string buf;
  for (uint64_t at = 0; at < s.size; at += kChunk) {
    size_t len = size_t(std::min<uint64_t>(kChunk + overlap, s.size - at));
    buf.resize(len);
    if (!read_at(fd, buf.data(), len, s.offset + at)) return false;
    if (!f(s.addr + at, std::string_view(buf))) return true;
  }
  return true;
}

// Addresses of the strings naming a source file by the end of its path
// (ssl_lib.cc: "../../vendor/boringssl/ssl/ssl_lib.cc").
std::vector<uint64_t> file_strings(int fd, const std::vector<Section>& secs, std::string_view suffix) {
  std::vector<uint64_t> out;
  const std::string needle = std::string(suffix) + '\0';
  for (const auto& s : secs) {
    if (s.exec) continue;
    each_chunk(fd, s, needle.size(), [&](uint64_t addr, std::string_view b) {
      // memmem: glibc's is vectorised, string_view::find is not (rodata
      // is tens of MB of short strings).
      for (const char* m = static_cast<const char*>(memmem(b.data(), b.size(), needle.data(), needle.size()));
           m && out.size() < kFileStringsMax;
           m = static_cast<const char*>(memmem(m + 1, b.size() - size_t(m + 1 - b.data()), needle.data(), needle.size()))) {
        size_t at = size_t(m - b.data());
        if (at > 0 && b[at - 1] != '/' && b[at - 1] != '\0') continue;  // "openssl/ssl_lib.cc"? no: a path ends here
        // The string's start: back to the NUL before it, within a path's length.
        uint64_t hit = addr + at, start = hit;
        char before[256];
        uint64_t back = std::min<uint64_t>(sizeof(before), hit - s.addr);
        if (!read_at(fd, before, back, s.offset + (hit - s.addr) - back)) continue;
        size_t i = back;
        while (i > 0 && before[i - 1] != '\0') --i;
        if (i == 0 && back == sizeof(before)) continue;  // no path is that long
        start = hit - (back - i);
        if (std::find(out.begin(), out.end(), start) == out.end()) out.push_back(start);  // chunks overlap
      }
      return out.size() < kFileStringsMax;
    });
  }
  return out;
}

// Addresses of the instructions that load one of `targets` into rcx:
// "mov ecx, imm32" (a program at a fixed address) or "lea rcx, [rip+d]".
std::vector<uint64_t> file_loads(int fd, const std::vector<Section>& secs, const std::vector<uint64_t>& targets,
                                 Addressing how, bool* too_many) {
  std::vector<uint64_t> out;
  for (const auto& s : secs) {
    if (!s.exec) continue;
    each_chunk(fd, s, 7, [&](uint64_t addr, std::string_view b) {
      const auto* p = reinterpret_cast<const uint8_t*>(b.data());
      size_t n = std::min(b.size(), kChunk);  // the overlap is the next chunk's
      auto add = [&](size_t i) {
        if (i >= n) return true;
        if (out.size() >= kSitesMax) {
          *too_many = true;
          return false;
        }
        out.push_back(addr + i);
        return true;
      };
      // memchr for the opcode byte, then the rest checked: glibc's memmem
      // is far slower on needles this short.
      // `back`: bytes of the instruction before the one looked for.
      auto each = [&](uint8_t byte, size_t back, auto&& check) {
        for (const uint8_t* m = p; (m = static_cast<const uint8_t*>(memchr(m, byte, n - size_t(m - p)))); ++m)
          if (size_t(m - p) >= back && size_t(m - p) + 7 <= b.size() && check(m) && !add(size_t(m - p) - back))
            return false;
        return true;
      };
      auto names_file = [&](uint64_t target) { return std::find(targets.begin(), targets.end(), target) != targets.end(); };
      // "mov ecx, imm32" (b9 imm32), or "lea rcx, [rip+d]" (48 8d 0d d32).
      bool ok = how == Addressing::absolute ? each(0xb9, 0,
                                                   [&](const uint8_t* m) {
                                                     uint32_t imm;
                                                     std::memcpy(&imm, m + 1, 4);
                                                     return names_file(imm);
                                                   })
                                            : each(0x8d, 1, [&](const uint8_t* m) {
                                                if (m[-1] != 0x48 || m[1] != 0x0d) return false;
                                                int32_t rel;
                                                std::memcpy(&rel, m + 2, 4);
                                                return names_file(addr + uint64_t(m - p) + 6 + int64_t(rel));
                                              });
      if (!ok) return false;
      return true;
    });
  }
  std::sort(out.begin(), out.end());
  return out;
}

const Section* section_of(const std::vector<Section>& secs, uint64_t addr) {
  for (const auto& s : secs)
    if (s.exec && addr >= s.addr && addr - s.addr < s.size) return &s;
  return nullptr;
}

// Function starts, sorted, from the search table of .eh_frame_hdr (the
// PT_GNU_EH_FRAME segment, LSB's layout): the unwinder's own index, so
// every function that can be unwound through has its start there, whatever
// the linker pads with. Empty where there is none, or it is encoded other
// than the usual way (a 4-byte count, datarel sdata4 pairs).
std::vector<uint64_t> unwind_starts(int fd) {
  Elf64_Ehdr eh;
  if (!read_at(fd, &eh, sizeof(eh), 0) || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 4096)
    return {};
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!read_at(fd, ph.data(), ph.size() * sizeof(Elf64_Phdr), eh.e_phoff)) return {};
  auto hdr = std::find_if(ph.begin(), ph.end(), [](const Elf64_Phdr& p) { return p.p_type == PT_GNU_EH_FRAME; });
  if (hdr == ph.end() || hdr->p_filesz < 12 || hdr->p_filesz > (64u << 20)) return {};
  std::string b(hdr->p_filesz, '\0');
  if (!read_at(fd, b.data(), b.size(), hdr->p_offset)) return {};
  auto byte = [&](size_t i) { return uint8_t(b[i]); };
  constexpr uint8_t kUdata4 = 0x03, kSdata4 = 0x0b, kUdata8 = 0x04, kSdata8 = 0x0c, kDatarelSdata4 = 0x3b;
  if (byte(0) != 1 || byte(2) != kUdata4 || byte(3) != kDatarelSdata4) return {};
  uint8_t ptr_format = byte(1) & 0x0f;
  size_t at = 4 + (ptr_format == kUdata4 || ptr_format == kSdata4 ? 4 : ptr_format == kUdata8 || ptr_format == kSdata8 ? 8 : 0);
  if (at == 4 || at + 4 > b.size()) return {};
  uint32_t count;
  std::memcpy(&count, b.data() + at, 4);
  at += 4;
  if (count > (b.size() - at) / 8) return {};
  std::vector<uint64_t> starts(count);
  for (uint32_t i = 0; i < count; ++i) {
    int32_t loc;
    std::memcpy(&loc, b.data() + at + 8 * size_t(i), 4);
    starts[i] = hdr->p_vaddr + uint64_t(int64_t(loc));
  }
  std::sort(starts.begin(), starts.end());
  return starts;
}

// The function around an error site: from the unwinder's start before it
// to the next start (padding included: it disassembles), where the program
// has an index of them; else from the 16-byte-aligned address after INT3
// padding before it to the next such address after it (clang and lld).
std::optional<Function> bounds(int fd, const Section& s, uint64_t site, const std::vector<uint64_t>& starts) {
  auto next = std::upper_bound(starts.begin(), starts.end(), site);
  if (next != starts.begin()) {
    Function f;
    f.start = *(next - 1);
    f.end = next == starts.end() ? s.addr + s.size : std::min(*next, s.addr + s.size);
    if (f.start >= s.addr && site - f.start <= kSiteFromStartMax && f.end - f.start <= kFunctionMax) return f;
  }
  uint64_t lo = site - std::min(kSiteFromStartMax, site - s.addr);
  uint64_t hi = site + std::min(kFunctionMax, s.addr + s.size - site);
  std::string b(hi - lo, '\0');
  if (!read_at(fd, b.data(), b.size(), s.offset + (lo - s.addr))) return std::nullopt;
  auto starts_here = [&](uint64_t a) {
    return a % 16 == 0 && (a == s.addr || (a > lo && uint8_t(b[a - 1 - lo]) == 0xcc));
  };
  // Walked by 16-byte steps within [lo, hi), counted, so no address wraps.
  Function f;
  bool start = false, end = false;
  uint64_t first = site & ~15ull;
  for (uint64_t k = 0; !start && first >= lo && k <= (first - lo) / 16; ++k)
    if (starts_here(first - 16 * k)) f.start = first - 16 * k, start = true;
  for (uint64_t a = first + 16; !end && a < hi; a += 16)
    if (starts_here(a)) f.end = a, end = true;
  if (!start || !end) return std::nullopt;
  return f;
}

// Reads a function whole: its error reasons and the functions it calls.
// False where the bytes are no function that holds `sites` (a boundary
// guessed wrong, data): such a function is never probed.
bool read_function(int fd, const Section& s, const Capstone& cap, uint32_t lib, const std::vector<uint64_t>& targets,
                   const std::vector<uint64_t>& sites, Function& f) {
  std::string code(f.end - f.start, '\0');
  if (!read_at(fd, code.data(), code.size(), s.offset + (f.start - s.addr))) return false;
  csh cs;
  if (cap.open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return false;
  cap.option(cs, CS_OPT_DETAIL, CS_OPT_ON);
  cs_insn* insn = cap.malloc(cs);
  struct Insn {
    uint64_t address;
    unsigned id;
    x86_reg reg = X86_REG_INVALID;  // first operand, a register
    bool has_value = false;         // second operand: an immediate, or a rip-relative address
    uint64_t value = 0;
  };
  std::vector<Insn> insns;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(code.data());
  size_t left = code.size();
  uint64_t at = f.start;
  while (insn && left > 0 && cap.disasm_iter(cs, &p, &left, &at, insn)) {
    Insn i{insn->address, insn->id};
    const cs_x86& x = insn->detail->x86;
    if (x.op_count >= 1 && x.operands[0].type == X86_OP_REG) i.reg = x.operands[0].reg;
    if (insn->id == X86_INS_CALL || insn->id == X86_INS_JMP) {
      if (x.op_count == 1 && x.operands[0].type == X86_OP_IMM) {
        uint64_t to = uint64_t(x.operands[0].imm);
        if (insn->id == X86_INS_CALL || to < f.start || to >= f.end) f.calls.insert(to);  // a tail call too
      }
    } else if (x.op_count == 2 && x.operands[1].type == X86_OP_IMM) {
      i.has_value = true;
      i.value = uint64_t(x.operands[1].imm);
    } else if (x.op_count == 2 && x.operands[1].type == X86_OP_MEM && x.operands[1].mem.base == X86_REG_RIP &&
               insn->id == X86_INS_LEA) {
      i.has_value = true;
      i.value = insn->address + insn->size + uint64_t(x.operands[1].mem.disp);
    }
    insns.push_back(i);
  }
  bool whole = left == 0;
  if (insn) cap.free(insn, 1);
  cap.close(&cs);
  if (!whole || insns.empty()) return false;
  // A function starts with saving registers or making its frame (or a
  // branch-target marker), not in the middle of something else.
  unsigned first = insns.front().id;
  if (first != X86_INS_PUSH && first != X86_INS_ENDBR64 && first != X86_INS_SUB) return false;
  size_t landed = 0;
  for (size_t k = 0; k < insns.size(); ++k) {
    const Insn& i = insns[k];
    bool file = i.has_value && (i.reg == X86_REG_ECX || i.reg == X86_REG_RCX) &&
                std::find(targets.begin(), targets.end(), i.value) != targets.end();
    if (!file) continue;
    if (std::find(sites.begin(), sites.end(), i.address) != sites.end()) ++landed;
    // The call's other arguments are set beside the file's, in the same
    // straight run of code: the library (edi) and the reason (edx), the
    // nearest after the file's, else before it.
    std::optional<uint32_t> reason;
    bool of_lib = false;
    auto look = [&](size_t j) {  // false at the run's end
      const Insn& o = insns[j];
      if (o.id == X86_INS_CALL || o.id == X86_INS_JMP || o.id == X86_INS_RET || (o.id >= X86_INS_JAE && o.id <= X86_INS_JS))
        return false;
      if (o.has_value && o.id == X86_INS_MOV && o.reg == X86_REG_EDI && o.value == lib) of_lib = true;
      if (o.has_value && o.id == X86_INS_MOV && o.reg == X86_REG_EDX && !reason) reason = uint32_t(o.value);
      return true;
    };
    for (size_t j = k + 1; j < std::min(insns.size(), k + 7) && look(j);) ++j;
    for (size_t j = k; j > 0 && j + 6 > k && look(j - 1);) --j;
    if (of_lib && reason) f.reasons.insert(*reason);
  }
  size_t expected = 0;
  for (uint64_t site : sites) expected += site >= f.start && site < f.end;
  return landed == expected;
}

bool has_all(const std::set<uint32_t>& have, std::initializer_list<uint32_t> want) {
  return std::all_of(want.begin(), want.end(), [&](uint32_t r) { return have.count(r); });
}

// The functions of a program that report errors naming one source file
// (its path ending in one of `suffixes`) under library number `lib`.
struct SiteFunctions {
  std::vector<Section> secs;
  size_t sites = 0;
  bool too_many = false;                   // more sites than are read
  bool readable = false;                   // a disassembler read them
  std::map<uint64_t, Function> functions;  // by start
  uint64_t file_offset(uint64_t addr) const {
    const Section* s = section_of(secs, addr);
    return addr - s->addr + s->offset;
  }
};

// nullopt: the program has no code that names the file.
std::optional<SiteFunctions> error_site_functions(int fd, std::initializer_list<std::string_view> suffixes, uint32_t lib,
                                                  std::string* why) {
  bool fixed_address = false;
  auto secs = sections(fd, &fixed_address);
  if (!secs) return std::nullopt;
  std::vector<uint64_t> strings;
  for (auto suffix : suffixes)
    for (uint64_t at : file_strings(fd, *secs, suffix)) strings.push_back(at);
  if (strings.empty()) return std::nullopt;
  SiteFunctions out;
  out.secs = std::move(*secs);
  std::vector<uint64_t> sites;
  if (fixed_address) sites = file_loads(fd, out.secs, strings, Addressing::absolute, &out.too_many);
  if (sites.empty() && !out.too_many) sites = file_loads(fd, out.secs, strings, Addressing::rip_relative, &out.too_many);
  if (sites.empty()) return std::nullopt;  // the name only: no code of the library's
  out.sites = sites.size();
  if (out.too_many) return out;
  const Capstone* cap = capstone(why);
  if (!cap) return out;
  out.readable = true;
  const std::vector<uint64_t> starts = unwind_starts(fd);
  std::set<uint64_t> unreadable;
  for (uint64_t site : sites) {
    bool known = false;
    for (const auto& [start, f] : out.functions) known |= site >= f.start && site < f.end;
    if (known) continue;
    const Section* s = section_of(out.secs, site);
    auto f = s ? bounds(fd, *s, site, starts) : std::nullopt;
    if (!f || out.functions.count(f->start) || unreadable.count(f->start)) continue;
    if (read_function(fd, *s, *cap, lib, strings, sites, *f)) out.functions[f->start] = *f;
    else unreadable.insert(f->start);
  }
  return out;
}

}  // namespace

std::optional<std::vector<StaticTlsFunction>> boringssl_functions(int fd, std::string* why) {
  auto read = error_site_functions(fd, {kFileSuffix}, kErrLibSsl, why);
  if (!read) return std::nullopt;
  std::vector<StaticTlsFunction> out;
  const std::string found = "statically linked BoringSSL (" + std::to_string(read->sites) + " error sites of ssl_lib.cc)";
  if (read->too_many) {
    *why = "statically linked BoringSSL with more than " + std::to_string(kSitesMax) +
           " error sites of ssl_lib.cc: not read";
    return out;
  }
  if (!read->readable) return out;
  const auto& functions = read->functions;

  auto named = [&](auto&& pred) {
    std::vector<const Function*> v;
    for (const auto& [start, f] : functions)
      if (pred(f)) v.push_back(&f);
    return v;
  };
  auto writes = named([](const Function& f) { return has_all(f.reasons, {kUninitialized, kBadLength, kShouldNotHaveBeenCalled}); });
  // ssl_read_impl: the read loop, the one that reports a failed handshake
  // while reading; SSL_read (or SSL_peek, which SSL_read calls where it
  // is not inlined: the same arguments and return) calls it or holds it.
  std::set<uint64_t> read_impls;
  for (const auto* f : named([](const Function& f) {
         return has_all(f.reasons, {kUninitialized, kSslHandshakeFailure}) && !f.reasons.count(kShouldNotHaveBeenCalled) &&
                !f.reasons.count(kBadLength);
       }))
    read_impls.insert(f->start);
  const std::set<uint32_t> read_reasons{kShouldNotHaveBeenCalled, kUninitialized, kSslHandshakeFailure,
                                        kNoRenegotiation,         kBadHelloRequest, kConnectionTypeNotSet};
  auto reads = named([&](const Function& f) {
    if (!f.reasons.count(kShouldNotHaveBeenCalled) || f.reasons.count(kBadLength)) return false;
    for (uint32_t r : f.reasons)
      if (!read_reasons.count(r)) return false;
    bool holds = has_all(f.reasons, {kUninitialized, kSslHandshakeFailure});
    bool calls = std::any_of(f.calls.begin(), f.calls.end(), [&](uint64_t c) { return read_impls.count(c) > 0; });
    return holds || calls;
  });
  // SSL_peek beside SSL_read, both with the loop inlined: SSL_read is the
  // larger (it does what SSL_peek does, then consumes).
  if (reads.size() == 2)
    reads = {std::max(reads[0], reads[1], [](const Function* a, const Function* b) { return a->end - a->start < b->end - b->start; })};
  auto handshakes = named([](const Function& f) { return f.reasons == std::set<uint32_t>{kConnectionTypeNotSet}; });

  auto count = [](size_t n) { return std::to_string(n) + (n == 1 ? " function" : " functions"); };
  if (writes.size() != 1 || reads.size() != 1) {
    *why = found + ", in " + std::to_string(functions.size()) + " functions read: SSL_write " +
           (writes.size() == 1 ? "found" : "not told apart (" + count(writes.size()) + " match)") + ", SSL_read " +
           (reads.size() == 1 ? "found" : "not told apart (" + count(reads.size()) + " match)") + "; not probed";
    return out;
  }
  auto offset = [&](uint64_t addr) { return read->file_offset(addr); };
  out.push_back({"SSL_write", FR_TLS_SSL_WRITE, offset(writes[0]->start)});
  out.push_back({"SSL_read", FR_TLS_SSL_READ, offset(reads[0]->start)});
  if (handshakes.size() == 1) out.push_back({"SSL_do_handshake", FR_TLS_HANDSHAKE, offset(handshakes[0]->start)});
  return out;
}

std::optional<std::vector<StaticTlsFunction>> aead_functions(int fd, std::string* why) {
  auto read = error_site_functions(fd, {"cipher/aead.c", "cipher/aead.cc", "cipher/aead.cc.inc"}, kErrLibCipher, why);
  if (!read) return std::nullopt;
  std::vector<StaticTlsFunction> out;
  const std::string found = "a statically linked AEAD of aws-lc or BoringSSL (" + std::to_string(read->sites) +
                            " error sites of cipher/aead.c)";
  if (read->too_many) {
    *why = found + ": more than " + std::to_string(kSitesMax) + " sites, not read";
    return out;
  }
  if (!read->readable) return out;
  auto only = [&](std::set<uint32_t> want) {
    std::vector<uint64_t> v;
    for (const auto& [start, f] : read->functions)
      if (f.reasons == want) v.push_back(start);
    return v;
  };
  std::vector<uint64_t> opens;
  for (const auto& [start, f] : read->functions) {
    bool core = has_all(f.reasons, {kOutputAliasesInput, kBadDecrypt, kBufferTooSmall});
    bool more = std::any_of(f.reasons.begin(), f.reasons.end(), [](uint32_t r) {
      return r != kOutputAliasesInput && r != kBadDecrypt && r != kBufferTooSmall && r != kCtrlNotImplemented;
    });
    if (core && !more) opens.push_back(start);
  }
  struct Kind {
    const char* name;
    uint32_t func;
    std::vector<uint64_t> at;
  };
  Kind kinds[] = {
      {"EVP_AEAD_CTX_seal", FR_TLS_AEAD_SEAL, only({kTooLarge, kBufferTooSmall, kOutputAliasesInput})},
      {"EVP_AEAD_CTX_seal_scatter", FR_TLS_AEAD_SEAL_SCATTER, only({kOutputAliasesInput, kInvalidOperation})},
      {"EVP_AEAD_CTX_open", FR_TLS_AEAD_OPEN, opens},
      {"EVP_AEAD_CTX_open_gather", FR_TLS_AEAD_OPEN_GATHER, only({kOutputAliasesInput, kCtrlNotImplemented})},
  };
  std::string said;
  for (const auto& k : kinds) {
    if (k.at.size() == 1) out.push_back({k.name, k.func, read->file_offset(k.at[0])});
    said += std::string(said.empty() ? "" : ", ") + k.name + " " +
            (k.at.size() == 1 ? "found" : k.at.empty() ? "not found" : std::to_string(k.at.size()) + " match");
  }
  bool seals = kinds[0].at.size() == 1 || kinds[1].at.size() == 1, opened = kinds[2].at.size() == 1 || kinds[3].at.size() == 1;
  if (!seals || !opened) {
    *why = found + ", in " + std::to_string(read->functions.size()) + " functions read: " + said + "; not probed";
    out.clear();
  }
  return out;
}

}  // namespace flightrec::probe
