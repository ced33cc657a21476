#include "ledger/checkpoint.h"

#include <charconv>

#include "common/text.h"

namespace flightrec::ledger {
namespace {

constexpr std::string_view kDash = "\xe2\x80\x94 ";  // U+2014 EM DASH, then a space

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;  // a last line without its newline (npos + 1 would be 0: forever)
    text.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace

bool valid_origin(std::string_view origin) {
  constexpr std::string_view kPrefix = "flightrec/";
  if (!origin.starts_with(kPrefix) || origin.size() < kPrefix.size() + 1 + 1 + 32) return false;
  std::string_view host = origin.substr(kPrefix.size(), origin.size() - kPrefix.size() - 33);
  std::string_view tail = origin.substr(origin.size() - 33);
  return host.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
             std::string_view::npos &&
         tail[0] == '/' && tail.substr(1).find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string Checkpoint::body() const {
  std::string out = origin + "\n" + std::to_string(size) + "\n" + base64_encode(as_bytes(root)) + "\n";
  if (chain) out += "chain " + to_hex(*chain) + "\n";
  return out;
}

std::optional<Note> parse_note(std::string_view note, std::string* why) {
  auto fail = [&](const char* reason) {
    *why = reason;
    return std::nullopt;
  };
  if (note.size() > 1 << 20) return fail("note too large");
  if (!is_valid_utf8(note)) return fail("note is not UTF-8");
  if (note.empty() || note.back() != '\n') return fail("note does not end in a newline");
  // Signed or not, the same bytes are refused: controls (NUL, CR, tab,
  // ESC...) and DEL anywhere but the line ends.
  for (char c : note)
    if (c != '\n' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f))
      return fail("note has control characters");
  size_t split = note.find("\n\n");
  Note n;
  if (split == std::string_view::npos) {
    n.text = std::string(note);  // an unsigned checkpoint: text only, no empty line
    return n;
  }
  if (split == 0) return fail("note starts with an empty line");
  n.text = std::string(note.substr(0, split + 1));
  // Every line after the empty one is a signature line "— NAME BASE64",
  // whoever's key it names (a line of another key is checked for form, then
  // ignored); an empty line among them, or none at all, is malformed.
  std::string_view block = note.substr(split + 2);
  if (block.empty()) return fail("note has an empty line but no signature line after it");
  for (std::string_view line : lines_of(block)) {
    if (line.substr(0, kDash.size()) != kDash) return fail("signature line does not start with an em dash");
    line.remove_prefix(kDash.size());
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return fail("signature line has no signature");
    if (!valid_key_name(line.substr(0, sp))) return fail("signature line's key name is not a key name");
    auto blob = base64_decode(line.substr(sp + 1));
    if (!blob || blob->size() < 5) return fail("signature is not base64 of key hash and signature");
    n.signatures.push_back({std::string(line.substr(0, sp)), blob->substr(0, 4), blob->substr(4)});
  }
  return n;
}

std::optional<std::vector<std::string>> split_saved_checkpoints(std::string_view file, std::string* why) {
  auto fail = [&](std::string reason) {
    *why = std::move(reason);
    return std::nullopt;
  };
  if (file.empty()) return fail("the file holds no checkpoint");
  if (file.back() != '\n') return fail("the file does not end in a newline");
  std::vector<std::string> notes;
  size_t pos = 0;
  while (pos < file.size()) {
    if (notes.size() == kMaxSavedCheckpoints)
      return fail("more than " + std::to_string(kMaxSavedCheckpoints) + " checkpoints");
    std::string name = "checkpoint " + std::to_string(notes.size() + 1);
    size_t blank = file.find("\n\n", pos);
    if (blank == std::string_view::npos) return fail(name + " has no signature (a blank line, then signature lines)");
    size_t end = blank + 2;  // after the text and the blank line: the signature lines
    while (end < file.size() && file.substr(end, kDash.size()) == kDash) end = file.find('\n', end) + 1;
    if (end == blank + 2) return fail(name + " has no signature line after its blank line");
    notes.emplace_back(file.substr(pos, end - pos));
    pos = end;
  }
  return notes;
}

std::optional<Checkpoint> parse_checkpoint(std::string_view text, std::string* why) {
  auto fail = [&](const char* reason) {
    *why = reason;
    return std::nullopt;
  };
  auto lines = lines_of(text);
  if (lines.size() < 3) return fail("checkpoint has fewer than three lines");
  Checkpoint c;
  c.origin = std::string(lines[0]);
  if (!valid_origin(c.origin)) return fail("checkpoint origin is not flightrec/HOST/32 lowercase hex digits");
  const std::string_view size = lines[1];
  auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), c.size);
  if (ec != std::errc() || end != size.data() + size.size() || size.empty() ||
      (size.size() > 1 && size[0] == '0'))
    return fail("checkpoint tree size is not a decimal number");
  if (c.size == 0 || c.size > uint64_t(INT64_MAX)) return fail("checkpoint tree size is not from 1 to 2^63-1");
  auto root = base64_decode(lines[2]);
  if (!root || root->size() != 32) return fail("checkpoint root hash is not 32 bytes of base64");
  std::copy(root->begin(), root->end(), c.root.begin());
  // The chain extension is line 4, once; other extension lines follow it
  // and are opaque.
  for (size_t i = 3; i < lines.size(); ++i) {
    if (!lines[i].starts_with("chain")) continue;
    if (i != 3) return fail("checkpoint has a chain line other than its fourth");
    std::string_view hex = lines[i].substr(std::min<size_t>(6, lines[i].size()));
    auto chain = hex_decode(hex);
    if (!lines[i].starts_with("chain ") || !chain || chain->size() != 32 ||
        hex.find_first_not_of("0123456789abcdef") != std::string_view::npos)
      return fail("checkpoint chain line is not \"chain \" and 64 lowercase hex digits");
    Hash h;
    std::copy(chain->begin(), chain->end(), h.begin());
    c.chain = h;
  }
  return c;
}

std::string sign_checkpoint(const Checkpoint& c, const SigningKey* key) {
  std::string text = c.body();
  if (!key) return text;
  const VerifierKey& v = key->verifier();
  return text + "\n" + std::string(kDash) + v.name() + " " +
         base64_encode(v.key_hash() + key->sign(text)) + "\n";
}

std::string check_signature(const Note& note, const VerifierKey& key) {
  if (note.signatures.empty()) return "checkpoint is not signed";
  // Every line that claims the key must verify: a valid line must not
  // vouch for a forged one beside it.
  bool signed_by_key = false;
  for (const auto& s : note.signatures) {
    if (s.name != key.name() || s.key_hash != key.key_hash()) continue;
    if (!key.verify(note.text, s.signature)) return "a signature line by " + key.name() + " does not verify";
    signed_by_key = true;
  }
  return signed_by_key ? "" : "not signed by the expected key " + key.name() + "+" + key.key_id_hex();
}

}  // namespace flightrec::ledger
