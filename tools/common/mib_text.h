// Byte counts as the tools print them: MiB with two decimals, as llama.cpp's buffer size lines.
#pragma once

#include <cstdio>
#include <string>

namespace stowage::tools {

/// `bytes` in MiB with two decimals ("3.58"); with `sign` a "+" before positive values ("+0.42",
/// "-1.14"), for differences.
inline std::string MibText(double bytes, bool sign = false) {
  char s[48];
  std::snprintf(s, sizeof s, sign ? "%+.2f" : "%.2f", bytes / 1048576.0);
  return s;
}

}  // namespace stowage::tools
