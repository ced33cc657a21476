#pragma once
// Checkpoints (signed tree heads) in the C2SP tlog-checkpoint format, signed
// as C2SP signed notes:
//   <origin>\n<tree size>\n<base64 root hash>\n[extension lines\n]
//   \n
//   — <key name> <base64(4-byte key hash || 64-byte Ed25519 signature)>\n
// flightrec adds one extension line, "chain <hex chain head>".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/hash.h"
#include "ledger/keys.h"

namespace flightrec::ledger {

struct Checkpoint {
  std::string origin;
  uint64_t size = 0;
  Hash root{};
  std::optional<Hash> chain;  // from the "chain" extension line
  std::string body() const;   // the signed text
};

struct NoteSignature {
  std::string name;
  std::string key_hash;   // 4 bytes
  std::string signature;  // 64 bytes
};

struct Note {
  std::string text;       // up to and including the last newline before the blank line
  std::vector<NoteSignature> signatures;
};

// A flightrec log's origin: "flightrec/" HOST "/" 32 lowercase hex digits,
// HOST one or more of [A-Za-z0-9._-] (docs/FORMAT.md §3.1).
bool valid_origin(std::string_view origin);

// nullopt with the reason in *why.
std::optional<Note> parse_note(std::string_view note, std::string* why);
std::optional<Checkpoint> parse_checkpoint(std::string_view text, std::string* why);

// A saved-checkpoint file (docs/FORMAT.md §5): one or more signed notes one
// after the other, as `flightrec checkpoint ... >> FILE` appends them. Each
// note is its text lines, a blank line and its signature lines (which start
// with an em dash); the next line not starting with one begins the next
// note. Returns the notes' texts exactly, or nullopt with why not.
inline constexpr size_t kMaxSavedCheckpoints = 100000;
std::optional<std::vector<std::string>> split_saved_checkpoints(std::string_view file, std::string* why);

// The body followed by the signature block (no block without a key).
std::string sign_checkpoint(const Checkpoint& c, const SigningKey* key);
// "" if some signature on the note is by `key` and verifies, else why not.
std::string check_signature(const Note& note, const VerifierKey& key);

}  // namespace flightrec::ledger
