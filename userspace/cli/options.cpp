#include "cli/options.h"

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

size_t parse_size(const std::string& text, const std::string& option) {
  size_t pos = 0;
  unsigned long long n = 0;
  try {
    n = std::stoull(text, &pos);
  } catch (...) {
    throw UsageError(option + ": not a size: '" + text + "'");
  }
  std::string suffix = text.substr(pos);
  unsigned shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) throw UsageError(option + ": unknown size suffix in '" + text + "' (use K, M or G)");
  if (n > (1ull << (40 - shift))) throw UsageError(option + ": size too large: '" + text + "'");
  return size_t(n << shift);
}

}  // namespace flightrec::cli
