// CLI11 checks for the tools' numeric options, one wording for every tool:
//   "--batch-size: expected an integer from 1 to 16777216, found 0"
//   "--fit-target: expected a number from 0 to 1048576, found nan"
// CLI11 runs a check on the option's text before converting it, so a value the option's C++ type
// cannot hold (a 300-digit number, "-1" for an unsigned field, "1.5" for an integer) gets this one
// line instead of CLI11's "Could not convert" or a silently wrapped or infinite value, and a
// floating-point option never receives NaN or infinity. CLI11 prefixes the option's name.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace stowage::tools {

/// `v` as a message shows it: at most 24 characters ("99999999999999999999... (300 characters)").
inline std::string ShownValue(const std::string& v) {
  return v.size() > 24 ? v.substr(0, 20) + "... (" + std::to_string(v.size()) + " characters)" : v;
}

/// A CLI11 check: the value is a decimal integer (optional sign, digits only: no "1.0", "1e3" or
/// "0x10") from `lo` to `hi` inclusive; `hi` may be up to UINT64_MAX (an unsigned 64-bit seed).
/// Else: "expected an integer from <lo> to <hi>[<also>], found <value>". `also` names values
/// outside the range that the option accepts by other means (", 'all' or 'auto'").
inline CLI::Validator IntegerIn(int64_t lo, uint64_t hi, const std::string& also = "") {
  const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range, also](std::string& v) -> std::string {
        std::string bad = "expected an integer from " + range + also + ", found " + ShownValue(v);
        size_t i = !v.empty() && (v[0] == '-' || v[0] == '+') ? 1 : 0;
        if (i == v.size() || v.find_first_not_of("0123456789", i) != std::string::npos) return bad;
        while (i + 1 < v.size() && v[i] == '0') ++i;  // leading zeros do not count towards the length
        if (v.size() - i > 20) return bad;            // beyond 2^64 either way
        unsigned __int128 mag = 0;
        for (; i < v.size(); ++i) mag = mag * 10 + static_cast<unsigned>(v[i] - '0');
        const __int128 x = v[0] == '-' ? -static_cast<__int128>(mag) : static_cast<__int128>(mag);
        return x < lo || x > static_cast<__int128>(hi) ? bad : std::string();
      },
      "[" + range + "]");
}

/// A CLI11 check: the value is a finite decimal number from `lo` to `hi` inclusive (never NaN or
/// infinity, which strtod would accept as "nan" or "inf"). Else: "expected a number from <lo> to
/// <hi>, found <value>".
inline CLI::Validator NumberIn(double lo, double hi) {
  auto fmt = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.15g", x);
    return std::string(b);
  };
  const std::string range = fmt(lo) + " to " + fmt(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& v) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(x) || x < lo ||
            x > hi)
          return "expected a number from " + range + ", found " + ShownValue(v);
        return std::string();
      },
      "[" + range + "]");
}

/// A CLI11 check: the value is a finite decimal number greater than 0, at most `hi`, whose
/// reciprocal is a finite float (llama.cpp common/arg.cpp --repeat-penalty: "must be finite and
/// greater than 0", with 1/x finite; a subnormal such as 1e-40 is refused). Else: "expected a
/// number greater than 0 and at most <hi>, found <value>".
inline CLI::Validator PositiveNumberUpTo(double hi) {
  char b[32];
  std::snprintf(b, sizeof b, "%.15g", hi);
  const std::string range = std::string("greater than 0 and at most ") + b;
  return CLI::Validator(
      [hi, range](std::string& v) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || !std::isfinite(x) || !(x > 0) ||
            x > hi || !std::isfinite(1.0f / static_cast<float>(x)))
          return "expected a number " + range + ", found " + ShownValue(v);
        return std::string();
      },
      "(0 to " + std::string(b) + "]");
}

}  // namespace stowage::tools
