#include "plan_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "mib_text.h"
#include "stowage/runtime/host_devices.h"

namespace stowage::tools {
namespace {

namespace fb = stowage::plan;

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

/// XML text: markup characters escaped, control and non-ASCII bytes as '?' (plan strings are bytes
/// from the GGUF and the command line, not necessarily UTF-8).
std::string Xml(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '&')
      o += "&amp;";
    else if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '"')
      o += "&quot;";
    else if (c < 32 || c >= 127)
      o += '?';
    else
      o += static_cast<char>(c);
  }
  return o;
}

std::string Mib(uint64_t b) { return MibText(static_cast<double>(b)) + " MiB"; }

/// `b` for a label: MiB below 1 GiB ("3.58 MiB", as the titles), GiB with two decimals above.
std::string Size(double b) {
  if (b < 1024.0 * 1048576.0) return MibText(b) + " MiB";
  char s[48];
  std::snprintf(s, sizeof s, "%.2f GiB", b / (1024.0 * 1048576.0));
  return s;
}

std::string Num(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f", v);
  return s;
}

/// Advance widths of DejaVu Sans (Debian's sans-serif) in 1/1000 em, ASCII 32..126. It is wider
/// than Liberation Sans, Arial and Helvetica, so a label fitted with it fits in those too.
constexpr uint16_t kAdvance[95] = {
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361,  318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635,  611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352,  635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,  525, 636, 337, 636, 838};
constexpr double kBoldFactor = 1.27;  // DejaVu Sans Bold's widest ratio to the regular face ('I')
constexpr double kEllipsisEm = 1.0;   // U+2026 in DejaVu Sans

/// The rendered width in pixels of `t` (as Xml writes it) at `size` px.
double TextWidth(const std::string& t, int size, bool bold = false) {
  double em = 0;
  for (unsigned char c : t) em += kAdvance[(c < 32 || c >= 127 ? '?' : c) - 32] / 1000.0;
  return em * size * (bold ? kBoldFactor : 1.0);
}

/// An sRGB colour "#rrggbb".
struct Rgb {
  int r, g, b;
  std::string Hex() const {
    char s[8];
    std::snprintf(s, sizeof s, "#%02x%02x%02x", r, g, b);
    return s;
  }
  static Rgb Of(const std::string& hex) {
    const auto v = std::stoul(hex.substr(1), nullptr, 16);
    return {static_cast<int>(v >> 16 & 255), static_cast<int>(v >> 8 & 255), static_cast<int>(v & 255)};
  }
  double Distance(const Rgb& o) const {
    return std::hypot(double(r - o.r), double(g - o.g), double(b - o.b));
  }
  double Luma() const { return 0.299 * r + 0.587 * g + 0.114 * b; }
};

/// Colours for the picture's legends, all distinct: a device or buffer type takes the first
/// colour of its list not yet used, and when its list is spent the colour of a hue/lightness grid
/// farthest from every colour used so far (so 12 GPUs, 3 host CPUs and their buffer types still
/// differ); a neutral grid (greys and faint tints) for CPUs, so that CPUs stay grey on many hosts.
class Palette {
 public:
  /// The next colour from `preferred` (or the grid), now used.
  std::string Take(const std::vector<const char*>& preferred, bool neutral = false) {
    for (const char* c : preferred)
      if (!used_.count(c)) return Use(c);
    Rgb best{0, 0, 0};
    double best_d = -1;
    const std::vector<double> sats = neutral ? std::vector<double>{0.0, 0.1} : std::vector<double>{0.35, 0.7};
    const std::vector<double> lights = neutral ? std::vector<double>{0.15, 0.25, 0.4, 0.55, 0.6, 0.75, 0.95}
                                               : std::vector<double>{0.35, 0.5, 0.65, 0.8};
    for (int h = 0; h < 360; h += neutral ? 30 : 10)
      for (const double l : lights)
        for (const double sat : sats) {
          const Rgb c = Hsl(h, sat, l);
          double d = 1e9;
          for (const auto& u : used_) d = std::min(d, c.Distance(Rgb::Of(u)));
          if (d > best_d) best_d = d, best = c;
        }
    return Use(best.Hex());
  }
  std::string Use(const std::string& c) {
    used_.insert(c);
    return c;
  }

 private:
  static Rgb Hsl(int h, double s, double l) {
    const double c = (1 - std::fabs(2 * l - 1)) * s, x = c * (1 - std::fabs(std::fmod(h / 60.0, 2) - 1)),
                 m = l - c / 2;
    double r = 0, g = 0, b = 0;
    if (h < 60)
      r = c, g = x;
    else if (h < 120)
      r = x, g = c;
    else if (h < 180)
      g = c, b = x;
    else if (h < 240)
      g = x, b = c;
    else if (h < 300)
      r = x, b = c;
    else
      r = c, b = x;
    auto q = [&](double v) { return static_cast<int>(std::lround((v + m) * 255)); };
    return {q(r), q(g), q(b)};
  }
  std::set<std::string> used_;
};

// Accelerators: Tableau 10 and Tableau 20's second round, less the greys and the colours closer
// than 40 (RGB distance) to another colour of these lists.
const std::vector<const char*> kDeviceColors = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#b6992d",
                                                "#a0cbe8", "#ffbe7d", "#8cd17d"};
// CPUs (every host's): greys.
const std::vector<const char*> kCpuColors = {"#bab0ac", "#7a7a7a", "#dcd6d2", "#5f5754"};
// The other buffer types (mapped, repack, host, row split).
const std::vector<const char*> kBufferColors = {"#c7b8e8", "#5fc4e8", "#d6e86b", "#e07be0",
                                                "#a8dcc0", "#9a6bd6", "#6b8fd6"};
const char* kUsageColor[] = {"#2c3e66", "#8e44ad", "#c0392b", "#16a085"};  // weights, KV, compute, output
const char* kUsageName[] = {"weights", "KV cache", "compute", "output"};

struct Svg {
  std::string body;
  double width = 1200, y = 0;
  /// `t` at (x, ty), cut to `max_w` pixels: the end replaced by an ellipsis and the whole text in a
  /// <title> (a browser shows it on hover).
  void Text(double x, double ty, const std::string& t, int size, double max_w, const std::string& extra = "",
            bool bold = false) {
    body += "<text x=\"" + Num(x) + "\" y=\"" + Num(ty) + "\" font-size=\"" + std::to_string(size) + "\"" +
            (bold ? " font-weight=\"bold\"" : "") + extra + ">" + Fitted(t, size, max_w, bold) + "</text>\n";
  }
  /// Like Text, running upwards from (x, ty) (a column header of a narrow column).
  void UpText(double x, double ty, const std::string& t, int size, double max_w) {
    body += "<text font-size=\"" + std::to_string(size) + "\" transform=\"translate(" + Num(x) + "," +
            Num(ty) + ") rotate(-90)\">" + Fitted(t, size, max_w, false) + "</text>\n";
  }
  void Heading(const std::string& t) {
    Text(10, y + 16, t, 15, width - 20, "", true);
    y += 26;
  }
  void Rect(double x, double ry, double w, double h, const std::string& fill, const std::string& title,
            const std::string& extra = "") {
    body += "<rect x=\"" + Num(x) + "\" y=\"" + Num(ry) + "\" width=\"" + Num(std::max(w, 0.5)) +
            "\" height=\"" + Num(h) + "\" fill=\"" + fill + "\"" + extra + "><title>" + Xml(title) +
            "</title></rect>\n";
  }
  static std::string Fitted(const std::string& t, int size, double max_w, bool bold) {
    if (TextWidth(t, size, bold) <= max_w) return Xml(t);
    std::string cut = t;
    const double ell = kEllipsisEm * size;
    while (!cut.empty() && TextWidth(cut, size, bold) + ell > max_w) cut.pop_back();
    return Xml(cut) + "&#8230;<title>" + Xml(t) + "</title>";
  }
};

/// A legend entry: a 12 px swatch and its text.
struct LegendEntry {
  std::string color, text, title, extra;
};

/// Draws `entries` in rows from x0, wrapping at the canvas' right edge; the swatches are
/// class="swatch" data-legend=`id` (the SVG checks find a legend's colours by them).
void Legend(Svg& s, double x0, const std::string& id, const std::vector<LegendEntry>& entries) {
  double lx = x0;
  for (const auto& e : entries) {
    const double w = 16 + std::min(TextWidth(e.text, 11), s.width - x0 - 30) + 14;
    if (lx > x0 && lx + w > s.width - 10) {
      lx = x0;
      s.y += 18;
    }
    s.Rect(lx, s.y, 12, 12, e.color, e.title.empty() ? e.text : e.title,
           " class=\"swatch\" data-legend=\"" + id + "\"" + e.extra);
    s.Text(lx + 16, s.y + 10, e.text, 11, s.width - 10 - (lx + 16));
    lx += w;
  }
  s.y += 18;
}

/// Joins `items` with `sep` into lines of at most `max_w` pixels at `size` px.
std::vector<std::string> Wrap(const std::vector<std::string>& items, const std::string& sep, int size,
                              double max_w) {
  std::vector<std::string> lines;
  for (const auto& it : items) {
    if (!lines.empty() && TextWidth(lines.back() + sep + it, size) <= max_w)
      lines.back() += sep + it;
    else
      lines.push_back(it);
  }
  return lines;
}

/// Whether plan device `dev` is a CPU: a CPU-type device, or another host's CPU (plan-model
/// --cluster makes host h's CPU the GPU-type device "MPI<h>:CPU", stowage/runtime/host_devices.h).
bool IsCpu(const fb::Device& dev) {
  const std::string name = Str(dev.name());
  return dev.type() == fb::DeviceType::CPU ||
         (HostOfDevice(name) > 0 && LocalDeviceName(name).substr(0, 3) == "CPU");
}

/// "CPU", "GPU", "ACCEL"; in a plan across hosts with the host: "CPU, host 1", "GPU, host 0".
std::string Kind(const fb::Plan& p, const fb::Device& dev) {
  std::string k = IsCpu(dev) ? "CPU" : fb::EnumNameDeviceType(dev.type());
  if (p.devices())
    for (const auto* d : *p.devices())
      if (HostOfDevice(Str(d->name())) > 0)
        return k + ", host " + std::to_string(HostOfDevice(Str(dev.name())));
  return k;
}

/// The colours of the picture: one per device (accelerators from kDeviceColors, CPUs grey), one per
/// buffer type name (a device's own buffer type takes the device's colour), all distinct.
struct Colors {
  std::vector<std::string> device;
  std::map<std::string, std::string> buft;
};

Colors PickColors(const fb::Plan& p) {
  Colors c;
  Palette pal;
  for (const char* u : kUsageColor) pal.Use(u);
  pal.Use("#f4f4f4");  // the memory bars' background
  if (p.devices())
    for (const auto* d : *p.devices())
      c.device.push_back(IsCpu(*d) ? pal.Take(kCpuColors, true) : pal.Take(kDeviceColors));
  if (p.buffers())
    for (const auto* b : *p.buffers()) {
      const std::string name = Str(b->name());
      if (c.buft.count(name)) continue;
      const int d = b->device();
      const bool own =
          d >= 0 && d < static_cast<int>(c.device.size()) && Str(p.devices()->Get(d)->name()) == name;
      c.buft[name] = own ? c.device[d] : pal.Take(kBufferColors);
    }
  return c;
}

/// The device whose memory a buffer takes: its device, except a GPU's buffers of another buffer
/// type than its own or its row split (the host buffer type, CUDA_Host: pinned host memory), which
/// count for the CPU (the first CPU-type device: this host's).
int MemoryDevice(const fb::Plan& p, const fb::Buffer& b) {
  const auto* devs = p.devices();
  const int d = b.device();
  if (!devs || d < 0 || d >= static_cast<int>(devs->size())) return -1;
  const auto* dev = devs->Get(d);
  if (dev->type() != fb::DeviceType::GPU) return d;
  const std::string buft = Str(b.buft()), name = Str(dev->name());
  if (buft == name || buft == name + "_Split") return d;
  for (flatbuffers::uoffset_t i = 0; i < devs->size(); ++i)
    if (devs->Get(i)->type() == fb::DeviceType::CPU) return static_cast<int>(i);
  return d;
}

void Memory(const fb::Plan& p, Svg& s, const Colors& colors) {
  s.Heading("Memory per device (free memory as the plan recorded it)");
  const auto* devs = p.devices();
  if (!devs || !p.buffers()) return;
  struct Use {
    uint64_t usage[4] = {0, 0, 0, 0};
    uint64_t mapped = 0;
    std::vector<std::pair<std::string, uint64_t>> parts[4];
  };
  std::vector<Use> use(devs->size());
  for (const auto* b : *p.buffers()) {
    const int d = MemoryDevice(p, *b);
    if (d < 0) continue;
    if (b->mapped()) {
      use[d].mapped += b->size();
      continue;
    }
    const int u = std::min<int>(static_cast<int>(b->usage()), 3);
    use[d].usage[u] += b->size();
    use[d].parts[u].emplace_back(Str(b->name()), b->size());
  }
  const double x0 = 230, note_w = 360, bar_w = s.width - x0 - note_w - 18;
  int last_host = 0;
  for (flatbuffers::uoffset_t d = 0; d < devs->size(); ++d) {
    const auto* dev = devs->Get(d);
    const std::string name = Str(dev->name());
    if (const int h = HostOfDevice(name); h != last_host) {  // a gap between hosts
      s.y += 6;
      last_host = h;
    }
    const Use& u = use[d];
    const uint64_t used = u.usage[0] + u.usage[1] + u.usage[2] + u.usage[3];
    const uint64_t scale = std::max<uint64_t>({dev->memory_free(), used + u.mapped, 1});
    s.Rect(10, s.y + 4, 12, 12, colors.device[d], name + ": " + Str(dev->description()),
           " class=\"swatch\" data-legend=\"devices-memory\"");
    s.Text(26, s.y + 14, name + " (" + Kind(p, *dev) + ")", 12, x0 - 8 - 26);
    s.Rect(x0, s.y, bar_w, 20, "#f4f4f4",
           dev->memory_total() > 0 ? "free " + Mib(dev->memory_free()) + " of " + Mib(dev->memory_total())
                                   : "memory not given (a registry CPU: host memory)",
           " stroke=\"#999\"");
    double x = x0;
    for (int k = 0; k < 4; ++k)
      for (const auto& [bname, bytes] : u.parts[k]) {
        const double w = bar_w * static_cast<double>(bytes) / static_cast<double>(scale);
        s.Rect(x, s.y, w, 20, kUsageColor[k],
               name + ": " + bname + " " + kUsageName[k] + " buffer, " + Mib(bytes));
        x += w;
      }
    if (u.mapped > 0) {
      const double w = bar_w * static_cast<double>(u.mapped) / static_cast<double>(scale);
      s.Rect(x, s.y + 2, w, 16, "none", "mapped weights (file pages, not allocated): " + Mib(u.mapped),
             " stroke=\"#2c3e66\" stroke-dasharray=\"4 2\"");
    }
    if (dev->memory_free() > 0 && dev->memory_free() < scale) {  // over: mark where free memory ends
      const double fx = x0 + bar_w * static_cast<double>(dev->memory_free()) / static_cast<double>(scale);
      s.body += "<line x1=\"" + Num(fx) + "\" y1=\"" + Num(s.y - 3) + "\" x2=\"" + Num(fx) + "\" y2=\"" +
                Num(s.y + 23) + "\" stroke=\"#d00\" stroke-width=\"2\"><title>free memory ends here: " +
                Mib(dev->memory_free()) + "</title></line>\n";
    }
    std::string note = Size(static_cast<double>(used)) + " allocated";
    if (u.mapped > 0) note += ", " + Size(static_cast<double>(u.mapped)) + " mapped";
    if (dev->memory_total() > 0) note += " / " + Size(static_cast<double>(dev->memory_free())) + " free";
    s.Text(x0 + bar_w + 8, s.y + 14, note, 11, note_w);
    s.y += 28;
  }
  std::vector<LegendEntry> legend;
  for (int k = 0; k < 4; ++k) legend.push_back({kUsageColor[k], kUsageName[k], "", ""});
  legend.push_back({"none", "mapped (file pages)", "", " stroke=\"#2c3e66\" stroke-dasharray=\"4 2\""});
  Legend(s, x0, "usage", legend);
  s.y += 12;
}

/// "blk.7.ffn_up_exps.weight" -> "ffn_up_exps", "cache_k_l7" -> "cache_k", others without ".weight".
std::string Role(const std::string& name) {
  std::string r = name;
  if (r.rfind("blk.", 0) == 0) {
    const size_t dot = r.find('.', 4);
    if (dot != std::string::npos) r = r.substr(dot + 1);
  }
  if (r.size() > 7 && r.compare(r.size() - 7, 7, ".weight") == 0) r.resize(r.size() - 7);
  const size_t l = r.rfind("_l");
  if (r.rfind("cache_", 0) == 0 && l != std::string::npos) r.resize(l);
  return r;
}

/// The fill of text drawn on `fill`: black on light colours, white on dark.
const char* TextOn(const std::string& fill) { return Rgb::Of(fill).Luma() < 128 ? "#fff" : "#000"; }

/// The weights and KV cache by tensor role and layer, with the layers grouped into columns.
struct LayerTable {
  struct Column {
    int first, last;  // layers, -1 the input layer, n_layer the output layer
    int Count() const { return last - first + 1; }
  };
  int n_layer = 0;
  std::vector<std::string> roles;                        // in the plan's tensor order
  std::map<std::string, int64_t> experts;                // role of a 3-D expert weight "*_exps" -> its ne2
  std::map<int, std::map<std::string, std::string>> at;  // layer -> role -> buffer name
  std::map<int, std::map<std::string, uint64_t>> bytes;  // layer -> role -> bytes
  std::vector<Column> cols;  // the input layer, runs of consecutive blocks placed alike, the output
  std::string Label(const Column& c) const {
    if (c.first < 0) return "input";
    if (c.first >= n_layer) return "output";
    return c.first == c.last ? "blk." + std::to_string(c.first)
                             : "blk." + std::to_string(c.first) + "-" + std::to_string(c.last);
  }
};

constexpr double kLayersX0 = 190, kMinCellW = 14, kMaxCellW = 110;

LayerTable TableOf(const fb::Plan& p) {
  LayerTable t;
  if (!p.tensors() || !p.buffers()) return t;
  t.n_layer = p.context() ? static_cast<int>(p.context()->n_layer()) : 0;
  for (const auto* w : *p.tensors()) {
    const std::string role = Role(Str(w->name()));
    if (std::find(t.roles.begin(), t.roles.end(), role) == t.roles.end()) t.roles.push_back(role);
    const int b = w->buffer();
    const std::string buf =
        b >= 0 && b < static_cast<int>(p.buffers()->size()) ? Str(p.buffers()->Get(b)->name()) : "?";
    const int l = std::clamp(w->layer(), -1, t.n_layer);
    t.at[l][role] = buf;
    t.bytes[l][role] += w->nbytes();
    if (role.find("_exps") != std::string::npos && w->ne() && w->ne()->size() > 2 && w->ne()->Get(2) > 1)
      t.experts[role] = std::max(t.experts[role], w->ne()->Get(2));
  }
  for (const auto& [l, m] : t.at) {
    if (!t.cols.empty() && l >= 0 && l < t.n_layer && t.cols.back().last == l - 1 &&
        t.cols.back().first >= 0 && t.at[t.cols.back().first] == m)
      t.cols.back().last = l;
    else
      t.cols.push_back({l, l});
  }
  return t;
}

void Layers(const fb::Plan& p, Svg& s, const Colors& colors, LayerTable& t) {
  s.Heading("Weights and KV cache: tensor roles x layers, filled with the buffer type holding them");
  if (!p.tensors() || !p.buffers()) return;
  const std::vector<std::string>& roles = t.roles;
  const std::vector<LayerTable::Column>& cols = t.cols;
  const std::map<std::string, int64_t>& experts = t.experts;
  auto& at = t.at;
  auto& bytes = t.bytes;
  auto label = [&](const LayerTable::Column& c) { return t.Label(c); };
  auto n_of = [](const LayerTable::Column& c) { return c.Count(); };
  const double x0 = kLayersX0, cell_h = 14;
  const double cell_w =
      std::clamp((s.width - x0 - 20) / std::max<size_t>(cols.size(), 1), kMinCellW, kMaxCellW);
  // Column headers: across when every one fits its column, else upwards.
  double widest = 0;
  for (const auto& c : cols) widest = std::max(widest, TextWidth(label(c), 10));
  const bool across = widest <= cell_w - 4;
  const double head_h = across ? 18 : widest + 8;
  for (size_t c = 0; c < cols.size(); ++c) {
    const double cx = x0 + c * cell_w;
    if (across)
      s.Text(cx + 2, s.y + 13, label(cols[c]), 10, cell_w - 4);
    else
      s.UpText(cx + cell_w / 2 + 4, s.y + head_h - 4, label(cols[c]), 10, head_h - 8);
  }
  s.y += head_h;
  const bool cell_text = cell_w >= 40;
  auto cell_label = [&](double cx, const std::string& text, const std::string& fill) {
    if (cell_text)
      s.Text(cx + 3, s.y + cell_h - 4, text, 9, cell_w - 8, std::string(" fill=\"") + TextOn(fill) + "\"");
  };
  for (const std::string& role : roles) {
    const auto ex = experts.find(role);
    s.Text(10, s.y + cell_h - 3,
           ex == experts.end() ? role : role + " (" + std::to_string(ex->second) + " experts)", 10, x0 - 16);
    for (size_t c = 0; c < cols.size(); ++c) {
      const auto& m = at[cols[c].first];
      const auto it = m.find(role);
      if (it == m.end()) continue;
      uint64_t total = 0;
      for (int l = cols[c].first; l <= cols[c].last; ++l) total += bytes[l][role];
      const auto color = colors.buft.find(it->second);
      s.Rect(x0 + c * cell_w + 1, s.y + 1, cell_w - 2, cell_h - 2,
             color == colors.buft.end() ? "#ccc" : color->second,
             label(cols[c]) + " " + role + ": " + it->second + " (" + std::to_string(n_of(cols[c])) +
                 " layer(s), " + Mib(total) + ")");
    }
    s.y += cell_h;
  }
  // What one layer of a column holds: its bytes, and (MoE) its experts, on which buffer types.
  s.y += 4;
  s.Text(10, s.y + cell_h - 3, "one layer: weights + KV", 10, x0 - 16);
  for (size_t c = 0; c < cols.size(); ++c) {
    uint64_t total = 0;
    for (int l = cols[c].first; l <= cols[c].last; ++l)
      for (const auto& [role, b] : bytes[l]) total += b;
    const double per = static_cast<double>(total) / n_of(cols[c]);
    s.Rect(x0 + c * cell_w + 1, s.y + 1, cell_w - 2, cell_h - 2, "#f4f4f4",
           label(cols[c]) + ": " + Mib(static_cast<uint64_t>(per)) + " per layer (weights and KV cache), " +
               Mib(total) + " in " + std::to_string(n_of(cols[c])) + " layer(s)");
    cell_label(x0 + c * cell_w, Size(per), "#f4f4f4");
  }
  s.y += cell_h;
  if (!experts.empty()) {
    int64_t n_exp = 0;
    for (const auto& [role, n] : experts) n_exp = std::max(n_exp, n);
    s.Text(10, s.y + cell_h - 3, "one layer: " + std::to_string(n_exp) + " experts", 10, x0 - 16);
    for (size_t c = 0; c < cols.size(); ++c) {
      const auto& m = at[cols[c].first];
      uint64_t total = 0;
      std::vector<std::string> bufts, names;
      for (const auto& [role, n] : experts) {
        const auto it = m.find(role);
        if (it == m.end()) continue;
        names.push_back(role);
        if (std::find(bufts.begin(), bufts.end(), it->second) == bufts.end()) bufts.push_back(it->second);
        for (int l = cols[c].first; l <= cols[c].last; ++l) total += bytes[l][role];
      }
      if (names.empty()) continue;
      std::string where;
      for (const auto& b : bufts) where += (where.empty() ? "" : "+") + b;
      std::string tensors;
      for (const auto& n : names) tensors += (tensors.empty() ? "" : ", ") + n;
      const double per = static_cast<double>(total) / n_of(cols[c]);
      const auto color = colors.buft.find(bufts.front());
      const std::string fill = bufts.size() == 1 && color != colors.buft.end() ? color->second : "#ccc";
      s.Rect(x0 + c * cell_w + 1, s.y + 1, cell_w - 2, cell_h - 2, fill,
             label(cols[c]) + ": " + std::to_string(n_exp) + " experts per layer (" + tensors + ") on " +
                 where + ": " + Mib(static_cast<uint64_t>(per)) + " per layer, " + Mib(total) + " in " +
                 std::to_string(n_of(cols[c])) + " layer(s)");
      const std::string full = where + " " + Size(per);  // the size alone when both do not fit
      cell_label(x0 + c * cell_w, TextWidth(full, 9) <= cell_w - 8 ? full : Size(per), fill);
    }
    s.y += cell_h;
  }
  s.y += 10;
  // Legend: each buffer type with its device.
  std::vector<LegendEntry> legend;
  std::set<std::string> shown;
  for (const auto* b : *p.buffers()) {
    if (b->usage() != fb::BufferUsage::Weights && b->usage() != fb::BufferUsage::KvCache) continue;
    const std::string name = Str(b->name());
    if (!shown.insert(name).second) continue;
    const int d = b->device();
    const auto* dev =
        p.devices() && d >= 0 && d < static_cast<int>(p.devices()->size()) ? p.devices()->Get(d) : nullptr;
    const std::string dev_name = dev ? Str(dev->name()) : "device#" + std::to_string(d);
    std::string text = name;
    if (dev_name != name || b->mapped() || (dev && IsCpu(*dev)))
      text += " (" + (dev_name == name ? Kind(p, *dev) : dev_name) + (b->mapped() ? ", mapped" : "") + ")";
    legend.push_back({colors.buft.at(name), text, "", ""});
  }
  Legend(s, 10, "buffer-types", legend);
  s.y += 12;
}

void Splits(const fb::Plan& p, Svg& s, const Colors& colors) {
  s.Heading("Graph splits: node ranges by backend, split inputs (copies) as ticks");
  if (!p.graphs() || !p.backends()) return;
  const double x0 = 150, w = s.width - x0 - 20;
  const auto& device_color = colors.device;
  for (const auto* g : *p.graphs()) {
    const double n = std::max<double>(g->nodes() ? g->nodes()->size() : 0, 1);
    int n_splits = 0, n_inputs = 0;
    std::vector<std::string> order;                          // backends in order of first split
    std::map<std::string, std::pair<int, int>> per_backend;  // name -> (splits, nodes)
    const double sy = s.y + 18;
    if (g->splits())
      for (const auto* sp : *g->splits()) {
        ++n_splits;
        const int be = sp->backend();
        const bool ok = be >= 0 && be < static_cast<int>(p.backends()->size());
        const std::string name = ok ? Str(p.backends()->Get(be)->name()) : "NULL";
        const int dev = ok ? p.backends()->Get(be)->device() : -1;
        const int inputs = sp->inputs() ? static_cast<int>(sp->inputs()->size()) : 0;
        int copies = 0;
        if (sp->inputs())
          for (const auto* in : *sp->inputs())
            copies += in->copies() ? static_cast<int>(in->copies()->size()) : 1;
        n_inputs += inputs;
        if (!per_backend.count(name)) order.push_back(name);
        auto& pb = per_backend[name];
        ++pb.first;
        pb.second += static_cast<int>(sp->node_end() - sp->node_begin());
        const double x = x0 + w * sp->node_begin() / n;
        s.Rect(x, sy, w * (sp->node_end() - sp->node_begin()) / n, 22,
               dev >= 0 && dev < static_cast<int>(device_color.size()) ? device_color[dev] : "#ccc",
               Str(g->name()) + " split on " + name + ": nodes [" + std::to_string(sp->node_begin()) + ", " +
                   std::to_string(sp->node_end()) + "), " + std::to_string(inputs) + " input(s), " +
                   std::to_string(copies) + " cop" + (copies == 1 ? "y" : "ies"),
               " stroke=\"#fff\" stroke-width=\"0.5\"");
        if (inputs > 0)
          s.body += "<line x1=\"" + Num(x) + "\" y1=\"" + Num(sy - 6) + "\" x2=\"" + Num(x) + "\" y2=\"" +
                    Num(sy) + "\" stroke=\"#333\" stroke-width=\"1\"><title>" + std::to_string(inputs) +
                    " split input(s) copied in</title></line>\n";
      }
    s.Text(10, sy + 15, Str(g->name()) + " (n_tokens " + std::to_string(g->max_tokens()) + ")", 12, x0 - 16);
    s.Text(x0, s.y + 8,
           std::to_string(n_splits) + " splits, " + std::to_string(n_inputs) + " split inputs, " +
               std::to_string(static_cast<long long>(n)) + " nodes",
           11, w);
    s.y = sy + 22;
    // Splits and nodes per backend under the strip, as many lines as they take.
    std::vector<std::string> items;
    for (const auto& name : order)
      items.push_back(name + " " + std::to_string(per_backend[name].first) + " splits / " +
                      std::to_string(per_backend[name].second) + " nodes");
    for (const auto& line : Wrap(items, "; ", 11, w)) {
      s.Text(x0, s.y + 14, line, 11, w);
      s.y += 15;
    }
    s.y += 12;
  }
  std::vector<LegendEntry> legend;
  for (flatbuffers::uoffset_t d = 0; p.devices() && d < p.devices()->size() && d < device_color.size(); ++d) {
    const auto* dev = p.devices()->Get(d);
    const std::string name = Str(dev->name());
    legend.push_back({device_color[d], IsCpu(*dev) ? name + " (" + Kind(p, *dev) + ")" : name,
                      name + ": " + Str(dev->description()), ""});
  }
  Legend(s, x0, "devices", legend);
  s.y += 6;
}

}  // namespace

std::string PlanSvg(const fb::Plan& p) {
  Svg s;
  const Colors colors = PickColors(p);
  LayerTable layers = TableOf(p);
  // Wider than 1200 px when the layer columns need it (layers placed alternately: one column each).
  s.width = std::max(s.width, kLayersX0 + kMinCellW * static_cast<double>(layers.cols.size()) + 20);
  s.y = 10;
  std::string title = "Stowage plan";
  if (const auto* m = p.model()) title += ": " + Str(m->path()) + " (" + Str(m->architecture()) + ")";
  s.Text(10, s.y + 18, title, 18, s.width - 20, "", true);
  s.y += 26;
  if (p.flags()) s.Text(10, s.y + 12, "flags: " + Str(p.flags()), 11, s.width - 20);
  s.y += 16;
  if (const auto* c = p.context())
    s.Text(10, s.y + 12,
           "n_ctx " + std::to_string(c->n_ctx()) + ", n_batch " + std::to_string(c->n_batch()) +
               ", n_ubatch " + std::to_string(c->n_ubatch()) + ", " + std::to_string(c->n_layer()) +
               " layers, n_copies " + std::to_string(p.n_copies()),
           11, s.width - 20);
  s.y += 26;
  Memory(p, s, colors);
  Layers(p, s, colors, layers);
  Splits(p, s, colors);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         Num(s.width) + "\" height=\"" + Num(s.y + 10) + "\" viewBox=\"0 0 " + Num(s.width) + " " +
         Num(s.y + 10) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n" + s.body +
         "</svg>\n";
}

}  // namespace stowage::tools
