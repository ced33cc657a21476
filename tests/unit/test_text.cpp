// printable(): what reaches a terminal from a record (paths, argv, comms,
// TLS summaries, model output) shows every byte and hides nothing.
#include <doctest/doctest.h>

#include <string>

#include "common/text.h"

using flightrec::printable;

namespace {

// UTF-8 of one code point.
std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

}  // namespace

TEST_CASE("printable: controls, bidirectional and invisible characters are spelled out; text is kept") {
  CHECK(printable("plain ASCII, é, 中文, 🙂") == "plain ASCII, é, 中文, 🙂");
  CHECK(printable("a\\b\n\r\t") == "a\\\\b\\n\\r\\t");
  CHECK(printable(std::string("\x1b[2J\x7f", 5)) == "\\u{001b}[2J\\u{007f}");
  CHECK(printable(utf8(0x9B)) == "\\u{009b}");  // C1 CSI
  // Each reorders or hides text: overrides, isolates, the Arabic letter
  // mark, zero-width and soft characters, separators, the BOM, annotations.
  for (uint32_t cp : {0x202Eu, 0x2066u, 0x2069u, 0x061Cu, 0x200Bu, 0x200Fu, 0x00ADu, 0x180Eu, 0x2028u, 0x2029u, 0x2064u,
                      0x206Fu, 0xFEFFu, 0xFFF9u, 0xFFFBu}) {
    CAPTURE(cp);
    std::string shown = printable("x" + utf8(cp) + "y");
    CHECK(shown.find(utf8(cp)) == std::string::npos);
    char want[16];
    snprintf(want, sizeof(want), "\\u{%04x}", unsigned(cp));
    CHECK(shown == "x" + std::string(want) + "y");
  }
  // Tag characters spell invisible ASCII ("hi" hidden after "ok").
  CHECK(printable("ok" + utf8(0xE0068) + utf8(0xE0069) + utf8(0xE007F)) == "ok\\u{e0068}\\u{e0069}\\u{e007f}");
  // Visible neighbours of those ranges are kept.
  for (uint32_t cp : {0x061Bu, 0x2027u, 0x2070u, 0xFFFCu, 0xE0100u}) {
    CAPTURE(cp);
    CHECK(printable(utf8(cp)) == utf8(cp));
  }
  // Bytes that are no UTF-8, and overlong or surrogate forms, as bytes.
  CHECK(printable(std::string("\xff\xc0\xaf", 3)) == "\\xff\\xc0\\xaf");
  CHECK(printable(std::string("\xed\xa0\x80", 3)) == "\\xed\\xa0\\x80");
}
