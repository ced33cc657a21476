#include "cli/options.h"

#include <filesystem>

#include "common/error.h"
#include "common/system.h"

#include <cerrno>
#include <cstdlib>
#include <iostream>

namespace flightrec::cli {

bool parse_options(const Args& args, const po::options_description& desc, const std::string& usage,
                   po::variables_map& vm, const po::positional_options_description* pos) {
  try {
    po::command_line_parser parser(args);
    parser.options(desc);
    if (pos) parser.positional(*pos);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << desc << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return true;
}

uint64_t parse_count(const std::string& text, const std::string& option) {
  // Digits only: strtoull would take "-1" as 2^64-1.
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(option + " takes a non-negative whole number, not '" + text + "'");
  errno = 0;
  unsigned long long n = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) throw UsageError(option + ": '" + text + "' is too large");
  return n;
}

size_t parse_size(const std::string& text, const std::string& option) {
  size_t digits = text.find_first_not_of("0123456789");
  if (digits == 0 || text.empty()) throw UsageError(option + ": not a size: '" + text + "'");
  if (digits == std::string::npos) digits = text.size();
  unsigned long long n = parse_count(text.substr(0, digits), option);
  std::string suffix = text.substr(digits);
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) throw UsageError(option + ": unknown size suffix in '" + text + "' (use K, M or G)");
  if (n > (1ull << (40 - shift))) throw UsageError(option + ": size too large: '" + text + "'");
  return size_t(n << shift);
}

std::string read_small_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  auto kind = std::filesystem::status(path, ec).type();
  if (ec || kind != std::filesystem::file_type::regular) throw Error(path + " is not a regular file (or cannot be read)");
  if (std::filesystem::file_size(path, ec) > (64u << 20)) throw Error(path + " is larger than 64 MiB: not " + what);
  return read_file(path);
}

ledger::VerifierKey read_verifier_key(const std::string& path) {
  auto key = ledger::VerifierKey::parse_file(read_small_file(path, "a key"));
  if (!key) throw Error(path + " is not a verifier key (the flightrec.pub that keygen writes)");
  return *key;
}

}  // namespace flightrec::cli
