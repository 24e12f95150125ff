// llama.cpp-style short options with several letters ("-ngl 99", "-ub 256", "-ctk q8_0") are not
// accepted by CLI11 2.1 (Debian 12), which allows one-letter short names only. Tools declare the
// long form with CLI11 and translate the llama.cpp spellings to it before parsing.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace stowage::tools {

/// (llama.cpp short spelling, long option) pairs, e.g. {"-ngl", "--n-gpu-layers"}.
using OptionAliases = std::vector<std::pair<std::string, std::string>>;

/// Parses argv with `app` after replacing each alias (also in "-ngl=99" form); --help names the
/// program (argv[0]'s file name) and lists each alias after its long option's description. Returns the exit
/// code CLI11 asks for (help, error) through `app.exit`, or -1 when parsing succeeded.
inline int ParseWithAliases(CLI::App& app, int argc, char** argv, const OptionAliases& aliases) {
  // --help shows the program's name and each llama.cpp spelling next to its long option.
  if (app.get_name().empty() && argc > 0) {
    const std::string self = argv[0];
    app.name(self.substr(self.find_last_of('/') == std::string::npos ? 0 : self.find_last_of('/') + 1));
  }
  for (const auto& [shortname, longname] : aliases) {
    CLI::Option* o = app.get_option_no_throw(longname);
    if (o != nullptr) o->description(o->get_description() + " (also " + shortname + ")");
  }
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {  // CLI11 takes the arguments in reverse order
    std::string a = argv[i];
    for (const auto& [shortname, longname] : aliases) {
      if (a == shortname) { a = longname; break; }
      if (a.rfind(shortname + "=", 0) == 0) { a = longname + a.substr(shortname.size()); break; }
    }
    args.push_back(a);
  }
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; a command-line error exits 1 as every other error (CLI11's own
    // codes, 105 and up, mean nothing to a shell script).
    return app.exit(e) == 0 ? 0 : 1;
  }
  return -1;
}

}  // namespace stowage::tools
