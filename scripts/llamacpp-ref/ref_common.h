// Helpers of the reference tools (refdump.cpp, quantize.cpp): loading llama.cpp's CPU backends and
// parsing numbers and ggml type names. Built by fetch.sh against the fetched llama.cpp, not by CMake.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

#ifndef REF_DEFAULT_BACKEND_DIR
#define REF_DEFAULT_BACKEND_DIR ""
#endif
#ifndef REF_NLC_VERSION
#define REF_NLC_VERSION "unknown"
#endif

namespace ref {

/// Prints "TOOL: MESSAGE" on stderr and exits with status 2 (bad command line).
[[noreturn]] inline void Usage(const char* tool, const std::string& message) {
  std::fprintf(stderr, "%s: %s (--help for the usage)\n", tool, message.c_str());
  std::exit(2);
}

/// Loads the CPU backends (built as loadable modules, GGML_BACKEND_DL): from $REF_BACKEND_DIR, else
/// from the folder fetch.sh compiled in (the fetched package's), so the tools run without the
/// environment line. Returns the folder used.
inline std::string LoadBackends() {
  const char* env = std::getenv("REF_BACKEND_DIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : REF_DEFAULT_BACKEND_DIR;
  if (dir.empty())
    ggml_backend_load_all();
  else
    ggml_backend_load_all_from_path(dir.c_str());
  return dir;
}

/// Splits the command line into options and positional arguments: for an argument that starts
/// with '-' (other than "-" alone) `on_option(name, value)` runs, where `value()` takes the next
/// argument as the option's value (a usage error naming the option when there is none), and
/// returns false for an option it does not know (a usage error). -h / --help print `usage` on
/// stdout and exit 0. Returns the positional arguments in order.
template <typename F>
std::vector<const char*> ParseArgs(const char* tool, const char* usage, int argc, char** argv,
                                   F&& on_option) {
  std::vector<const char*> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (a.size() < 2 || a[0] != '-') {
      pos.push_back(argv[i]);
      continue;
    }
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage(tool, a + " needs a value");
      return argv[++i];
    };
    if (!on_option(a, value)) Usage(tool, "unknown option '" + a + "'");
  }
  return pos;
}

/// A whole decimal number in [lo, hi] for `what`; anything else is a usage error naming it.
inline long long ParseInt(const char* tool, const char* what, const char* s, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    Usage(tool, std::string(what) + ": expected a whole number in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], got '" + s + "'");
  return v;
}

/// A ggml type by its name (ggml_type_name: f16, q8_0, q4_K, ...; case-insensitive) or its id.
inline ggml_type ParseType(const char* tool, const char* what, const char* s) {
  if (*s >= '0' && *s <= '9') {
    const long long id = ParseInt(tool, what, s, 0, GGML_TYPE_COUNT - 1);
    if (ggml_type_size(ggml_type(id)) != 0) return ggml_type(id);
    Usage(tool, std::string(what) + ": ggml type id " + s + " is not a type of this ggml");
  }
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* name = ggml_type_name(ggml_type(t));
    if (name != nullptr && ggml_type_size(ggml_type(t)) != 0 && strcasecmp(name, s) == 0) return ggml_type(t);
  }
  Usage(tool,
        std::string(what) + ": expected a ggml type name (f16, q8_0, q4_0, ...) or id, got '" + s + "'");
}

}  // namespace ref
