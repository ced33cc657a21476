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

// Addresses of the strings naming ssl_lib.cc ("../../vendor/boringssl/ssl/ssl_lib.cc").
std::vector<uint64_t> file_strings(int fd, const std::vector<Section>& secs) {
  std::vector<uint64_t> out;
  const std::string needle = std::string(kFileSuffix) + '\0';
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

// The function around an error site: from the 16-byte-aligned address
// after INT3 padding before it to the next such address after it.
std::optional<Function> bounds(int fd, const Section& s, uint64_t site) {
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
bool read_function(int fd, const Section& s, const Capstone& cap, const std::vector<uint64_t>& targets,
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
    bool ssl = false;
    auto look = [&](size_t j) {  // false at the run's end
      const Insn& o = insns[j];
      if (o.id == X86_INS_CALL || o.id == X86_INS_JMP || o.id == X86_INS_RET || (o.id >= X86_INS_JAE && o.id <= X86_INS_JS))
        return false;
      if (o.has_value && o.id == X86_INS_MOV && o.reg == X86_REG_EDI && o.value == kErrLibSsl) ssl = true;
      if (o.has_value && o.id == X86_INS_MOV && o.reg == X86_REG_EDX && !reason) reason = uint32_t(o.value);
      return true;
    };
    for (size_t j = k + 1; j < std::min(insns.size(), k + 7) && look(j);) ++j;
    for (size_t j = k; j > 0 && j + 6 > k && look(j - 1);) --j;
    if (ssl && reason) f.reasons.insert(*reason);
  }
  size_t expected = 0;
  for (uint64_t site : sites) expected += site >= f.start && site < f.end;
  return landed == expected;
}

bool has_all(const std::set<uint32_t>& have, std::initializer_list<uint32_t> want) {
  return std::all_of(want.begin(), want.end(), [&](uint32_t r) { return have.count(r); });
}

}  // namespace

std::optional<std::vector<StaticTlsFunction>> boringssl_functions(int fd, std::string* why) {
  bool fixed_address = false;
  auto secs = sections(fd, &fixed_address);
  if (!secs) return std::nullopt;
  std::vector<uint64_t> strings = file_strings(fd, *secs);
  if (strings.empty()) return std::nullopt;
  bool too_many = false;
  std::vector<uint64_t> sites;
  if (fixed_address) sites = file_loads(fd, *secs, strings, Addressing::absolute, &too_many);
  if (sites.empty() && !too_many) sites = file_loads(fd, *secs, strings, Addressing::rip_relative, &too_many);
  if (sites.empty()) return std::nullopt;  // the name only: no code of BoringSSL's
  std::vector<StaticTlsFunction> out;
  const std::string found = "statically linked BoringSSL (" + std::to_string(sites.size()) + " error sites of ssl_lib.cc)";
  if (too_many) {
    *why = "statically linked BoringSSL with more than " + std::to_string(kSitesMax) +
           " error sites of ssl_lib.cc: not read";
    return out;
  }
  const Capstone* cap = capstone(why);
  if (!cap) return out;

  std::map<uint64_t, Function> functions;  // by start
  std::set<uint64_t> unreadable;
  for (uint64_t site : sites) {
    bool known = false;
    for (const auto& [start, f] : functions) known |= site >= f.start && site < f.end;
    if (known) continue;
    const Section* s = section_of(*secs, site);
    auto f = s ? bounds(fd, *s, site) : std::nullopt;
    if (!f || functions.count(f->start) || unreadable.count(f->start)) continue;
    if (read_function(fd, *s, *cap, strings, sites, *f)) functions[f->start] = *f;
    else unreadable.insert(f->start);
  }

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
  auto offset = [&](uint64_t addr) {
    const Section* s = section_of(*secs, addr);
    return addr - s->addr + s->offset;
  };
  out.push_back({"SSL_write", FR_TLS_SSL_WRITE, offset(writes[0]->start)});
  out.push_back({"SSL_read", FR_TLS_SSL_READ, offset(reads[0]->start)});
  if (handshakes.size() == 1) out.push_back({"SSL_do_handshake", FR_TLS_HANDSHAKE, offset(handshakes[0]->start)});
  return out;
}

}  // namespace flightrec::probe
