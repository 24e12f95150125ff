// llama.cpp-style short options with several letters ("-ngl 99", "-ub 256", "-ctk q8_0") are not
// accepted by CLI11 2.1 (Debian 12), which allows one-letter short names only. Tools declare the
// long form with CLI11 and translate the llama.cpp spellings to it before parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli_numbers.h"
#include "stowage/runtime/version.h"

namespace stowage::tools {

/// (llama.cpp short spelling, long option) pairs, e.g. {"-ngl", "--n-gpu-layers"}.
using OptionAliases = std::vector<std::pair<std::string, std::string>>;

/// Lets the last of a repeated single-value option win, as in llama.cpp's tools ("-n 8 -n 16" is
/// -n 16; CLI11 refuses the second by default). Options that collect values (-ot, --device lists
/// given as vectors) keep every occurrence. Applies to `app` and its subcommands.
inline void LastOccurrenceWins(CLI::App& app) {
  for (CLI::Option* o : app.get_options())
    if (o->get_items_expected_max() == 1 && o->get_multi_option_policy() == CLI::MultiOptionPolicy::Throw)
      o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (CLI::App* sub : app.get_subcommands({})) LastOccurrenceWins(*sub);
}

/// The values of a repeatable comma-list option joined with ',': "--free CUDA0=8GiB --free CUDA1=4GiB"
/// reads as "CUDA0=8GiB,CUDA1=4GiB", so that the option's parser sees every item (and refuses an
/// item repeated for one device instead of keeping the last).
inline std::string JoinValues(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

/// CLI11 check for llama.cpp's -fa / --flash-attn value (2026: on|off|auto; also 1|0|true|false),
/// normalized to "on", "off" or "auto" (llama.cpp DEC25's auto: on when every layer's attention lands
/// on the layer's device, planner::FlashAttnDeviceMismatch; the tools default to off, FEB25's);
/// FlashAttnModeOf (planner_args.h) turns it into the planner's mode.
inline CLI::Validator FlashAttnValue() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v == "off" || v == "0" || v == "false")
          v = "off";
        else if (v == "on" || v == "1" || v == "true")
          v = "on";
        else if (!v.empty() && v[0] == '-')  // "-fa -c 64": llama.cpp FEB25's bare -fa flag
          return "needs a value: on, off or auto (llama.cpp's -fa VALUE of 2026; FEB25's bare -fa is -fa "
                 "on), got " +
                 v.substr(0, 24);
        else if (v != "auto")
          return "expected on, off or auto, found " + v.substr(0, 24);
        return "";
      },
      "on|off|auto");
}

/// True for a single-dash word of two or more letters ("-fa", "-sm", "-no-cnv"): llama.cpp's
/// multi-letter flags. CLI11 would read "-fa" as "-f a" (a prompt file named "a") or "-sm" as
/// "-s m"; such a word is refused instead unless it is one of the tool's aliases. Short options
/// with an attached value ("-n8", "-t2", "-c512") do not match.
inline bool IsMultiLetterFlag(const std::string& a) {
  if (a.size() < 3 || a[0] != '-' || !std::isalpha(static_cast<unsigned char>(a[1])) ||
      !std::isalpha(static_cast<unsigned char>(a[2])))
    return false;
  for (size_t i = 3; i < a.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(a[i])) && a[i] != '-') return false;
  return true;
}

/// Parses argv with `app` after replacing each alias (also in "-ngl=99" form); --help names the
/// program (argv[0]'s file name) and lists each alias after its long option's description;
/// --version prints "<program> <stowage_version_string()>" and exits 0. A
/// repeated single-value option takes its last value (LastOccurrenceWins); a llama.cpp
/// multi-letter flag the tool does not know ("-fa") is refused with one line naming it rather
/// than split into one-letter options. A command-line error CLI11 finds is one line "<program>:
/// error: <CLI11's message> (see --help)" on stderr. Returns 0 after --help / --version, 1 after a
/// command-line error, or -1 when parsing succeeded.
inline int ParseWithAliases(CLI::App& app, int argc, char** argv, const OptionAliases& aliases) {
  LastOccurrenceWins(app);
  // --help shows the program's name and each llama.cpp spelling next to its long option.
  if (app.get_name().empty() && argc > 0) {
    const std::string self = argv[0];
    app.name(self.substr(self.find_last_of('/') == std::string::npos ? 0 : self.find_last_of('/') + 1));
  }
  app.set_version_flag("--version", app.get_name() + " " + stowage_version_string(),
                       "print the version (project version and git describe) and exit");
  for (const auto& [shortname, longname] : aliases) {
    CLI::Option* o = app.get_option_no_throw(longname);
    if (o != nullptr) o->description(o->get_description() + " (also " + shortname + ")");
  }
  // The options of `a` or, for a subcommand with fallthrough, of its parents.
  auto find = [](CLI::App* a, const std::string& name) -> const CLI::Option* {
    for (; a != nullptr; a = a->get_parent())
      if (const CLI::Option* o = a->get_option_no_throw(name)) return o;
    return nullptr;
  };
  std::vector<std::string> args;
  CLI::App* ctx = &app;     // the (sub)command whose options the words belong to
  bool value_next = false;  // the word before was an option that takes the next word as its value
  bool verbatim = false;    // after "--": operands only
  for (int i = 1; i < argc; ++i) {
    const std::string given = argv[i];
    std::string a = given;
    if (verbatim || value_next) {  // a value ("-p -hello", "-p -ngl") or an operand: as written
      value_next = false;
      args.push_back(a);
      continue;
    }
    if (a == "--") {
      verbatim = true;
      args.push_back(a);
      continue;
    }
    bool aliased = false;
    for (const auto& [shortname, longname] : aliases) {
      if (a == shortname) {
        a = longname;
        aliased = true;
        break;
      }
      if (a.rfind(shortname + "=", 0) == 0) {
        a = longname + a.substr(shortname.size());
        aliased = true;
        break;
      }
    }
    // "--file=" with nothing after '=': CLI11 would take the next argument as the value.
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
      std::fprintf(stderr, "%s: error: '%s' gives the option no value\n", app.get_name().c_str(),
                   given.c_str());
      return 1;
    }
    if (!aliased && IsMultiLetterFlag(a) && find(ctx, a) == nullptr) {
      std::fprintf(stderr,
                   "%s: error: unknown argument '%s' (a llama.cpp flag %s does not have; see --help)\n",
                   app.get_name().c_str(), a.c_str(), app.get_name().c_str());
      return 1;
    }
    for (CLI::App* sub : ctx->get_subcommands({}))
      if (sub->get_name() == a) {
        ctx = sub;
        break;
      }
    if (a.size() > 1 && a[0] == '-' && a.find('=') == std::string::npos) {
      const CLI::Option* o = find(ctx, a);
      value_next = o != nullptr && o->get_items_expected_min() > 0;
    }
    args.push_back(a);
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; a command-line error exits 1 as every other error (CLI11's own
    // codes, 105 and up, mean nothing to a shell script), on one line naming the tool as the
    // tools' other errors ("plan-model: error: --flash-attn: expected on, off or auto, found x").
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e) == 0 ? 0 : 1;
    std::fprintf(stderr, "%s: error: %s (see --help)\n", app.get_name().c_str(), e.what());
    return 1;
  }
  return -1;
}

}  // namespace stowage::tools
