// The escape sequences llama.cpp's tools expand in a prompt (common's string_process_escapes,
// on by default, off with --no-escape): "\n" in `-p "line\nline"` is a newline, as in llama-cli.
#pragma once

#include <string>

namespace stowage::tools {

/// Returns `in` with \n, \r, \t, \', \", \\ and \xHH (exactly two hex digits: one byte) replaced by
/// the characters they name. Any other backslash sequence and a trailing backslash are kept as
/// written, as llama.cpp keeps them; so is a \x without two hex digits (llama.cpp reads the two
/// characters with strtol, which also takes a sign or a space: its "\x-1" is byte 0xff, here it
/// stays "\x-1").
inline std::string ProcessEscapes(const std::string& in) {
  auto hex = [](char ch) -> int {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    const char e = in[++i];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'x':
        if (i + 2 < in.size() && hex(in[i + 1]) >= 0 && hex(in[i + 2]) >= 0) {
          out += static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2]));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\';
        out += e;
    }
  }
  return out;
}

}  // namespace stowage::tools
