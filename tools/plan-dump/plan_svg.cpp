#include "plan_svg.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "mib_text.h"

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

std::string Num(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f", v);
  return s;
}

/// A qualitative palette (Tableau 10 and a second, lighter round).
const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                          "#ff9da7", "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#8cd17d", "#ff9d9a",
                          "#86bcb6", "#f1ce63", "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e"};
constexpr int kPaletteSize = sizeof kPalette / sizeof kPalette[0];
const char* kUsageColor[] = {"#4e79a7", "#59a14f", "#f28e2b", "#b07aa1"};  // weights, KV, compute, output
const char* kUsageName[] = {"weights", "KV cache", "compute", "output"};

struct Svg {
  std::string body;
  double width = 1200, y = 0;
  void Text(double x, double ty, const std::string& t, int size = 12, const char* extra = "") {
    body += "<text x=\"" + Num(x) + "\" y=\"" + Num(ty) + "\" font-size=\"" + std::to_string(size) + "\"" +
            extra + ">" + Xml(t) + "</text>\n";
  }
  void Rect(double x, double ry, double w, double h, const std::string& fill, const std::string& title,
            const char* extra = "") {
    body += "<rect x=\"" + Num(x) + "\" y=\"" + Num(ry) + "\" width=\"" + Num(std::max(w, 0.5)) +
            "\" height=\"" + Num(h) + "\" fill=\"" + fill + "\"" + extra + "><title>" + Xml(title) +
            "</title></rect>\n";
  }
};

/// The device whose memory a buffer takes: its device, except a GPU's buffers of another buffer
/// type than its own or its row split (the host buffer type, CUDA_Host: pinned host memory), which
/// count for the CPU (the last device).
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

void Memory(const fb::Plan& p, Svg& s) {
  s.Text(10, s.y + 16, "Memory per device (free memory as the plan recorded it)", 15,
         " font-weight=\"bold\"");
  s.y += 26;
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
  const double x0 = 230, bar_w = s.width - x0 - 360;
  for (flatbuffers::uoffset_t d = 0; d < devs->size(); ++d) {
    const auto* dev = devs->Get(d);
    const Use& u = use[d];
    const uint64_t used = u.usage[0] + u.usage[1] + u.usage[2] + u.usage[3];
    const uint64_t scale = std::max<uint64_t>({dev->memory_free(), used + u.mapped, 1});
    s.Text(10, s.y + 14, Str(dev->name()) + " (" + fb::EnumNameDeviceType(dev->type()) + ")", 12);
    s.Rect(x0, s.y, bar_w, 20, "#f4f4f4",
           dev->memory_total() > 0 ? "free " + Mib(dev->memory_free()) + " of " + Mib(dev->memory_total())
                                   : "memory not given (a registry CPU: host memory)",
           " stroke=\"#999\"");
    double x = x0;
    for (int k = 0; k < 4; ++k)
      for (const auto& [name, bytes] : u.parts[k]) {
        const double w = bar_w * static_cast<double>(bytes) / static_cast<double>(scale);
        s.Rect(x, s.y, w, 20, kUsageColor[k],
               Str(dev->name()) + ": " + name + " " + kUsageName[k] + " buffer, " + Mib(bytes));
        x += w;
      }
    if (u.mapped > 0) {
      const double w = bar_w * static_cast<double>(u.mapped) / static_cast<double>(scale);
      s.Rect(x, s.y + 2, w, 16, "none", "mapped weights (file pages, not allocated): " + Mib(u.mapped),
             " stroke=\"#4e79a7\" stroke-dasharray=\"4 2\"");
    }
    if (dev->memory_free() > 0 && dev->memory_free() < scale) {  // over: mark where free memory ends
      const double fx = x0 + bar_w * static_cast<double>(dev->memory_free()) / static_cast<double>(scale);
      s.body += "<line x1=\"" + Num(fx) + "\" y1=\"" + Num(s.y - 3) + "\" x2=\"" + Num(fx) + "\" y2=\"" +
                Num(s.y + 23) + "\" stroke=\"#d00\" stroke-width=\"2\"><title>free memory ends here: " +
                Mib(dev->memory_free()) + "</title></line>\n";
    }
    std::string note = Mib(used) + " allocated";
    if (u.mapped > 0) note += ", " + Mib(u.mapped) + " mapped";
    if (dev->memory_total() > 0) note += " / " + Mib(dev->memory_free()) + " free";
    s.Text(x0 + bar_w + 8, s.y + 14, note, 11);
    s.y += 28;
  }
  double lx = x0;
  for (int k = 0; k < 4; ++k) {
    s.Rect(lx, s.y, 12, 12, kUsageColor[k], kUsageName[k]);
    s.Text(lx + 16, s.y + 10, kUsageName[k], 11);
    lx += 100;
  }
  s.Rect(lx, s.y, 12, 12, "none", "mapped", " stroke=\"#4e79a7\" stroke-dasharray=\"4 2\"");
  s.Text(lx + 16, s.y + 10, "mapped (file pages)", 11);
  s.y += 30;
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

void Layers(const fb::Plan& p, Svg& s, const std::map<std::string, std::string>& buft_color) {
  s.Text(10, s.y + 16,
         "Weights and KV cache: tensor roles x layers, filled with the buffer type holding them", 15,
         " font-weight=\"bold\"");
  s.y += 26;
  if (!p.tensors() || !p.buffers()) return;
  const int n_layer = p.context() ? static_cast<int>(p.context()->n_layer()) : 0;
  // Per layer (-1 input .. n_layer output): role -> buffer name, and bytes.
  std::vector<std::string> roles;
  std::map<int, std::map<std::string, std::string>> at;
  std::map<int, std::map<std::string, uint64_t>> bytes;
  for (const auto* t : *p.tensors()) {
    const std::string role = Role(Str(t->name()));
    if (std::find(roles.begin(), roles.end(), role) == roles.end()) roles.push_back(role);
    const int b = t->buffer();
    const std::string buf =
        b >= 0 && b < static_cast<int>(p.buffers()->size()) ? Str(p.buffers()->Get(b)->name()) : "?";
    const int l = std::clamp(t->layer(), -1, n_layer);
    at[l][role] = buf;
    bytes[l][role] += t->nbytes();
  }
  // Columns: the input layer, runs of consecutive blocks placed alike, the output layer.
  struct Column {
    int first, last;
  };
  std::vector<Column> cols;
  for (const auto& [l, m] : at) {
    if (!cols.empty() && l >= 0 && l < n_layer && cols.back().last == l - 1 && cols.back().first >= 0 &&
        at[cols.back().first] == m)
      cols.back().last = l;
    else
      cols.push_back({l, l});
  }
  auto label = [&](const Column& c) {
    if (c.first < 0) return std::string("input");
    if (c.first >= n_layer) return std::string("output");
    return c.first == c.last ? "blk." + std::to_string(c.first)
                             : "blk." + std::to_string(c.first) + "-" + std::to_string(c.last);
  };
  const double x0 = 150, cell_h = 14;
  const double cell_w = std::clamp((s.width - x0 - 20) / std::max<size_t>(cols.size(), 1), 14.0, 90.0);
  // Column headers, rotated when narrow.
  const double head_h = cell_w < 60 ? 60 : 20;
  for (size_t c = 0; c < cols.size(); ++c) {
    const double cx = x0 + c * cell_w + cell_w / 2;
    const std::string n = std::to_string(cols[c].last - cols[c].first + 1);
    if (cell_w < 60)
      s.body += "<text font-size=\"10\" transform=\"translate(" + Num(cx + 3) + "," + Num(s.y + head_h - 4) +
                ") rotate(-60)\">" + Xml(label(cols[c])) + "</text>\n";
    else
      s.Text(cx - cell_w / 2 + 2, s.y + 14, label(cols[c]), 10);
    (void)n;
  }
  s.y += head_h;
  for (const std::string& role : roles) {
    s.Text(10, s.y + cell_h - 3, role, 10);
    for (size_t c = 0; c < cols.size(); ++c) {
      const auto& m = at[cols[c].first];
      const auto it = m.find(role);
      if (it == m.end()) continue;
      uint64_t total = 0;
      for (int l = cols[c].first; l <= cols[c].last; ++l) total += bytes[l][role];
      const auto color = buft_color.find(it->second);
      s.Rect(x0 + c * cell_w + 1, s.y + 1, cell_w - 2, cell_h - 2,
             color == buft_color.end() ? "#ccc" : color->second,
             label(cols[c]) + " " + role + ": " + it->second + " (" +
                 std::to_string(cols[c].last - cols[c].first + 1) + " layer(s), " + Mib(total) + ")");
    }
    s.y += cell_h;
  }
  s.y += 8;
  // Legend: each buffer type with its device.
  double lx = 10;
  std::vector<std::string> shown;
  for (const auto* b : *p.buffers()) {
    if (b->usage() != fb::BufferUsage::Weights && b->usage() != fb::BufferUsage::KvCache) continue;
    const std::string name = Str(b->name());
    if (std::find(shown.begin(), shown.end(), name) != shown.end()) continue;
    shown.push_back(name);
    const int d = b->device();
    const std::string dev = p.devices() && d >= 0 && d < static_cast<int>(p.devices()->size())
                                ? Str(p.devices()->Get(d)->name())
                                : "device#" + std::to_string(d);
    const std::string text = name + " (" + dev + (b->mapped() ? ", mapped" : "") + ")";
    if (lx + 30 + 7.0 * text.size() > s.width) {
      lx = 10;
      s.y += 18;
    }
    s.Rect(lx, s.y, 12, 12, buft_color.at(name), text);
    s.Text(lx + 16, s.y + 10, text, 11);
    lx += 30 + 7.0 * text.size();
  }
  s.y += 30;
}

void Splits(const fb::Plan& p, Svg& s, const std::vector<std::string>& device_color) {
  s.Text(10, s.y + 16, "Graph splits: node ranges by backend, split inputs (copies) as ticks", 15,
         " font-weight=\"bold\"");
  s.y += 26;
  if (!p.graphs() || !p.backends()) return;
  const double x0 = 150, w = s.width - x0 - 20;
  for (const auto* g : *p.graphs()) {
    const double n = std::max<double>(g->nodes() ? g->nodes()->size() : 0, 1);
    int n_splits = 0, n_inputs = 0;
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
    s.Text(10, sy + 15, Str(g->name()) + " (n_tokens " + std::to_string(g->max_tokens()) + ")", 12);
    std::string summary = std::to_string(n_splits) + " splits, " + std::to_string(n_inputs) +
                          " split inputs, " + std::to_string(static_cast<long long>(n)) + " nodes:";
    for (const auto& [name, v] : per_backend)
      summary +=
          " " + name + " " + std::to_string(v.first) + " splits / " + std::to_string(v.second) + " nodes;";
    s.Text(x0, s.y + 8, summary, 11);
    s.y += 52;
  }
  double lx = x0;
  for (flatbuffers::uoffset_t d = 0; d < p.devices()->size() && d < device_color.size(); ++d) {
    const std::string name = Str(p.devices()->Get(d)->name());
    s.Rect(lx, s.y, 12, 12, device_color[d], name);
    s.Text(lx + 16, s.y + 10, name, 11);
    lx += 30 + 7.0 * name.size();
  }
  s.y += 24;
}

}  // namespace

std::string PlanSvg(const fb::Plan& p) {
  Svg s;
  // Colours: one per device (GPUs in order, the CPU grey), one per buffer type name.
  std::vector<std::string> device_color;
  if (p.devices())
    for (flatbuffers::uoffset_t d = 0; d < p.devices()->size(); ++d)
      device_color.push_back(p.devices()->Get(d)->type() == fb::DeviceType::CPU ? "#bab0ac"
                                                                                : kPalette[d % 9]);
  std::map<std::string, std::string> buft_color;
  int next = 10;
  if (p.buffers())
    for (const auto* b : *p.buffers()) {
      const std::string name = Str(b->name());
      if (buft_color.count(name)) continue;
      // A device's own buffer type takes the device's colour; others (mapped, repack, host) their own.
      const int d = b->device();
      const bool own = p.devices() && d >= 0 && d < static_cast<int>(p.devices()->size()) &&
                       Str(p.devices()->Get(d)->name()) == name;
      buft_color[name] = own ? device_color[d] : kPalette[next++ % kPaletteSize];
    }
  s.y = 10;
  std::string title = "Stowage plan";
  if (const auto* m = p.model()) title += ": " + Str(m->path()) + " (" + Str(m->architecture()) + ")";
  s.Text(10, s.y + 18, title, 18, " font-weight=\"bold\"");
  s.y += 26;
  if (p.flags()) s.Text(10, s.y + 12, "flags: " + Str(p.flags()), 11);
  s.y += 16;
  if (const auto* c = p.context())
    s.Text(10, s.y + 12,
           "n_ctx " + std::to_string(c->n_ctx()) + ", n_batch " + std::to_string(c->n_batch()) +
               ", n_ubatch " + std::to_string(c->n_ubatch()) + ", " + std::to_string(c->n_layer()) +
               " layers, n_copies " + std::to_string(p.n_copies()),
           11);
  s.y += 26;
  Memory(p, s);
  Layers(p, s, buft_color);
  Splits(p, s, device_color);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         Num(s.width) + "\" height=\"" + Num(s.y + 10) + "\" viewBox=\"0 0 " + Num(s.width) + " " +
         Num(s.y + 10) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n" + s.body +
         "</svg>\n";
}

}  // namespace stowage::tools
