#include "events/dns_message.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>

namespace flightrec::events::dns {
namespace {

uint16_t u16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t u32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// The name at `at`; *next just past it where it starts (not where a
// pointer leads). Pointers only go backwards, so a name ends.
std::optional<std::string> read_name(const uint8_t* msg, size_t size, size_t at, size_t* next) {
  std::string out;
  size_t pos = at, total = 0, hops = 0;
  bool jumped = false;
  for (;;) {
    if (pos >= size) return std::nullopt;
    uint8_t len = msg[pos];
    if ((len & 0xc0) == 0xc0) {
      if (pos + 1 >= size || ++hops > 32) return std::nullopt;  // bounded work per name
      size_t target = size_t(len & 0x3f) << 8 | msg[pos + 1];
      if (target >= pos || target < 12) return std::nullopt;  // forwards, itself or into the header
      if (!jumped) *next = pos + 2;
      jumped = true;
      pos = target;
      continue;
    }
    if (len & 0xc0) return std::nullopt;  // the reserved label types
    if (len == 0) {
      if (!jumped) *next = pos + 1;
      return out;
    }
    if (pos + 1 + len > size || (total += len + 1) > 255) return std::nullopt;
    if (!out.empty()) out += '.';
    for (size_t i = 0; i < len; ++i) {
      char c = char(msg[pos + 1 + i]);
      if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
        out += c;
      } else if (c >= 'A' && c <= 'Z') {
        out += char(c - 'A' + 'a');
      } else {
        char esc[5];
        snprintf(esc, sizeof(esc), "\\%03u", unsigned(uint8_t(c)));
        out += esc;
      }
    }
    pos += 1 + len;
  }
}

std::optional<Question> read_question(const uint8_t* msg, size_t size) {
  if (size < 12 || u16(msg + 4) == 0) return std::nullopt;
  Question q;
  q.id = u16(msg);
  q.flags = u16(msg + 2);
  size_t next = 0;
  auto name = read_name(msg, size, 12, &next);
  if (!name || next + 4 > size) return std::nullopt;
  q.name = std::move(*name);
  q.type = u16(msg + next);
  q.klass = u16(msg + next + 2);
  q.end = next + 4;
  return q;
}

}  // namespace

std::optional<Question> parse_query(const uint8_t* msg, size_t size) {
  if (size < 12 || (msg[2] & 0x80) || ((msg[2] >> 3) & 0xf) != 0) return std::nullopt;  // a response, or not QUERY
  return read_question(msg, size);
}

std::optional<Response> parse_response(const uint8_t* msg, size_t size) {
  if (size < 12 || !(msg[2] & 0x80) || u16(msg + 4) != 1) return std::nullopt;
  auto q = read_question(msg, size);
  if (!q) return std::nullopt;
  Response r;
  r.question = std::move(*q);
  r.rcode = msg[3] & 0xf;
  r.truncated = msg[2] & 0x02;
  size_t pos = r.question.end;
  for (unsigned i = 0, count = u16(msg + 6); i < count; ++i) {
    size_t next = 0;
    auto owner = read_name(msg, size, pos, &next);
    if (!owner || next + 10 > size) return r.truncated ? std::optional(r) : std::nullopt;
    uint16_t type = u16(msg + next), klass = u16(msg + next + 2), rdlen = u16(msg + next + 8);
    uint32_t ttl = u32(msg + next + 4);
    size_t rdata = next + 10;
    if (rdata + rdlen > size) return r.truncated ? std::optional(r) : std::nullopt;
    pos = rdata + rdlen;
    if (klass != 1) continue;  // IN only
    Record rec;
    rec.owner = std::move(*owner);
    rec.type = type;
    rec.ttl = ttl > 0x7fffffff ? 0 : ttl;  // RFC 2181 8: a TTL with the top bit set is 0
    char text[INET6_ADDRSTRLEN] = {};
    if (type == kTypeA && rdlen == 4) {
      inet_ntop(AF_INET, msg + rdata, text, sizeof(text));
      rec.address = text;
    } else if (type == kTypeAaaa && rdlen == 16) {
      inet_ntop(AF_INET6, msg + rdata, text, sizeof(text));
      rec.address = text;
    } else if (type == kTypeCname) {
      size_t after = 0;
      auto target = read_name(msg, rdata + rdlen, rdata, &after);
      if (!target || after != rdata + rdlen) return std::nullopt;
      rec.target = std::move(*target);
    } else {
      continue;
    }
    r.answers.push_back(std::move(rec));
  }
  return r;
}

Resolution resolve(const Response& r, const std::string& name) {
  Resolution out;
  std::string at = name;
  bool any_ttl = false;
  auto take_ttl = [&](uint32_t ttl) {
    out.ttl = any_ttl ? std::min(out.ttl, ttl) : ttl;
    any_ttl = true;
  };
  // Follow the chain (at most as long as the records): owner by owner.
  for (size_t hop = 0; hop <= r.answers.size(); ++hop) {
    const Record* cname = nullptr;
    for (const auto& rec : r.answers) {
      if (rec.owner != at) continue;
      if (!rec.address.empty()) {
        out.addresses.push_back(rec.address);
        take_ttl(rec.ttl);
      } else if (rec.type == kTypeCname && !cname) {
        cname = &rec;
      }
    }
    if (!out.addresses.empty() || !cname) break;
    take_ttl(cname->ttl);
    at = cname->target;
    out.cnames.push_back(at);
  }
  if (out.addresses.empty()) out.ttl = 0;
  return out;
}

std::optional<std::string> build_query(uint16_t id, const std::string& name, uint16_t type) {
  std::string out = {char(id >> 8), char(id), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};  // RD, one question
  std::string label;
  auto end_label = [&] {
    if (label.empty() || label.size() > 63) return false;
    out += char(label.size()) + label;
    label.clear();
    return true;
  };
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == '.') {
      if (!end_label()) return std::nullopt;
    } else if (c == '\\') {  // \DDD, as read_name writes a byte that is no host name character
      if (name.size() - i < 4) return std::nullopt;
      int v = 0;
      for (size_t k = 1; k <= 3; ++k) {
        if (name[i + k] < '0' || name[i + k] > '9') return std::nullopt;
        v = v * 10 + (name[i + k] - '0');
      }
      if (v > 255) return std::nullopt;
      label += char(v);
      i += 3;
    } else {
      label += c;
    }
  }
  if (!name.empty() && !end_label()) return std::nullopt;
  if (out.size() + 1 > 12 + 255) return std::nullopt;
  out += '\0';
  out += char(type >> 8);
  out += char(type);
  out += '\0';
  out += '\1';  // IN
  return out;
}

std::string refusal(const uint8_t* msg, size_t size, uint8_t rcode) {
  if (size < 12 || (msg[2] & 0x80)) return "";
  auto q = parse_query(msg, size);
  size_t keep = q ? q->end : 12;
  std::string out(reinterpret_cast<const char*>(msg), keep);
  out[2] = char(0x80 | (msg[2] & 0x79));  // QR; the opcode and RD kept
  out[3] = char(q ? rcode : kFormErr);
  out[4] = 0;
  out[5] = q ? 1 : 0;
  std::memset(out.data() + 6, 0, 6);  // no answers, authorities or additionals
  return out;
}

bool cap_ttls(std::string& msg, uint32_t max_ttl) {
  auto* m = reinterpret_cast<uint8_t*>(msg.data());
  size_t size = msg.size();
  if (size < 12) return false;
  size_t pos = 12, next = 0;
  for (unsigned i = 0, n = u16(m + 4); i < n; ++i, pos = next + 4)
    if (!read_name(m, size, pos, &next) || next + 4 > size) return false;
  std::vector<size_t> ttl_at;
  for (unsigned i = 0, n = unsigned(u16(m + 6)) + u16(m + 8) + u16(m + 10); i < n; ++i) {
    if (!read_name(m, size, pos, &next) || next + 10 > size) return false;
    uint16_t type = u16(m + next), rdlen = u16(m + next + 8);
    if (next + 10 + rdlen > size) return false;
    if (type != 41) ttl_at.push_back(next + 4);
    pos = next + 10 + rdlen;
  }
  for (size_t at : ttl_at) {
    uint32_t ttl = u32(m + at);
    if (ttl <= max_ttl) continue;
    m[at] = uint8_t(max_ttl >> 24), m[at + 1] = uint8_t(max_ttl >> 16), m[at + 2] = uint8_t(max_ttl >> 8), m[at + 3] = uint8_t(max_ttl);
  }
  return true;
}

std::string type_name(uint16_t type) {
  switch (type) {
    case kTypeA: return "A";
    case 2: return "NS";
    case kTypeCname: return "CNAME";
    case 6: return "SOA";
    case 12: return "PTR";
    case 15: return "MX";
    case 16: return "TXT";
    case kTypeAaaa: return "AAAA";
    case 33: return "SRV";
    case 64: return "SVCB";
    case 65: return "HTTPS";
    case 255: return "ANY";
    default: return std::to_string(type);
  }
}

std::string rcode_name(uint8_t rcode) {
  static const char* names[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"};
  return rcode < 6 ? names[rcode] : std::to_string(rcode);
}

}  // namespace flightrec::events::dns
