// memory_plot.cpp: the memory plot's SVG (see memory_plot.h). Plain SVG 1.1 text, no scripts, no
// external fonts or styles, so any browser or image viewer shows it as it is.
#include "policy/memory_plot.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "policy/printable_text.h"

namespace gswap::policy {
namespace {

constexpr double kWidth = 960, kHeight = 600;
constexpr double kLeft = 96, kRight = 936;          // plot area, both panels
constexpr double kTopY0 = 104, kTopY1 = 396;        // memory panel
constexpr double kBottomY0 = 444, kBottomY1 = 540;  // swap traffic panel
constexpr const char* kLiveColor = "#9aa5b1";
constexpr const char* kResidentColor = "#1f5fbf";
constexpr const char* kBudgetColor = "#d62728";
constexpr const char* kOutColor = "#ff8c1a";
constexpr const char* kInColor = "#2ca02c";
// The most ticks an axis draws. nice_step gives at most about ten, but a loop that adds a step
// until it passes the end must also end where that step is lost to rounding or the end is huge.
constexpr int kMaxTicks = 64;

// Text from outside (a trace's path or name) is made printable first: valid UTF-8 with no control
// character, as XML requires.
std::string xml_escape(const std::string& raw) {
  std::string out;
  for (char c : printable_text(raw)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A number without trailing zeros, at most two decimals.
std::string number(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

struct Unit {
  double size;
  const char* name;
};

Unit bytes_unit(double max) {
  if (max >= 2.0 * (1ull << 30)) return {double(1ull << 30), "GiB"};
  if (max >= 2.0 * (1ull << 20)) return {double(1ull << 20), "MiB"};
  if (max >= 2.0 * (1ull << 10)) return {1024.0, "KiB"};
  return {1.0, "B"};
}

Unit time_unit(double max_us) {
  if (max_us >= 2e6) return {1e6, "s"};
  if (max_us >= 2e3) return {1e3, "ms"};
  return {1.0, "\xC2\xB5s"};  // µs
}

}  // namespace

double nice_step(double max, int max_ticks) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double raw = max / std::max(1, max_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

std::string bytes_label(double bytes, double unit, const char* unit_name) {
  return number(bytes / unit) + " " + unit_name;
}

std::string render_memory_plot_svg(const MemoryPlot& p) {
  const MemoryCurves& c = p.curves;
  // An infinite (or nan) iteration has no time axis; the callers' traces are bounded
  // (trace_json.h), so this is a caller's bug, refused rather than drawn forever.
  if (!std::isfinite(c.duration_us) || !std::isfinite(p.traffic.bucket_us))
    throw std::invalid_argument(fmt::format(
        "memory plot: the iteration lasts {} us (buckets of {} us); only finite times are drawn",
        c.duration_us, p.traffic.bucket_us));
  const double duration = c.duration_us > 0 ? c.duration_us : 1;
  const double top_max =
      1.08 *
      static_cast<double>(std::max({c.peak_live, c.peak_resident, p.budget, std::uint64_t{1}}));
  const Unit bu = bytes_unit(top_max);
  const Unit tu = time_unit(duration);
  auto x = [&](double us) { return kLeft + (kRight - kLeft) * us / duration; };
  auto y = [&](double bytes) { return kTopY1 - (kTopY1 - kTopY0) * bytes / top_max; };

  std::string s;
  auto out = [&]<typename... A>(fmt::format_string<A...> f, A&&... a) {
    s += fmt::format(f, std::forward<A>(a)...);
  };
  out("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  out("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
      kWidth, kHeight);
  out("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, kHeight);
  out("<text id=\"title\" x=\"{}\" y=\"28\" font-size=\"18\" font-weight=\"bold\">{}</text>\n",
      kLeft, xml_escape(p.title));
  // The subtitle's parts ("; "-separated) on two lines when one would not fit.
  std::string sub1 = p.subtitle, sub2;
  if (const std::size_t cut = p.subtitle.find("; ");
      cut != std::string::npos && p.subtitle.size() > 120) {
    sub1 = p.subtitle.substr(0, cut);
    sub2 = p.subtitle.substr(cut + 2);
  }
  out("<text id=\"subtitle\" x=\"{}\" y=\"46\" font-size=\"12\" fill=\"#444\">{}</text>\n", kLeft,
      xml_escape(sub1));
  if (!sub2.empty())
    out("<text x=\"{}\" y=\"62\" font-size=\"12\" fill=\"#444\">{}</text>\n", kLeft,
        xml_escape(sub2));

  // Legend, one row under the title.
  struct Entry {
    const char* label;
    const char* color;
    const char* kind;  // line, dash, area, box
  };
  const Entry legend[] = {{"live bytes (allocated)", kLiveColor, "area"},
                          {"resident bytes (on the device)", kResidentColor, "line"},
                          {"budget", kBudgetColor, "dash"},
                          {"swap-out (D2H)", kOutColor, "box"},
                          {"restore (H2D)", kInColor, "box"}};
  double lx = kLeft;
  out("<g id=\"legend\" font-size=\"12\">\n");
  for (const Entry& e : legend) {
    const std::string kind = e.kind;
    if (kind == "line" || kind == "dash")
      out("<line x1=\"{}\" y1=\"86\" x2=\"{}\" y2=\"86\" stroke=\"{}\" stroke-width=\"2.5\"{}/>\n",
          lx, lx + 22, e.color, kind == "dash" ? " stroke-dasharray=\"6 4\"" : "");
    else
      out("<rect x=\"{}\" y=\"80\" width=\"22\" height=\"12\" fill=\"{}\"{}/>\n", lx, e.color,
          kind == "area" ? " fill-opacity=\"0.6\"" : "");
    out("<text x=\"{}\" y=\"90\">{}</text>\n", lx + 28, e.label);
    lx += 28 + 7.0 * static_cast<double>(std::string_view(e.label).size()) + 22;
  }
  out("</g>\n");

  // Memory panel: grid, y ticks, curves.
  const double ystep = nice_step(top_max / bu.size, 8) * bu.size;
  // Grid lines and byte labels of a panel's y axis, from 0 to `max` every `step`.
  auto byte_ticks = [&](const char* cls, double max, double step, auto to_y, const Unit& u) {
    for (int k = 0; k <= kMaxTicks; ++k) {
      const double v = k * step;
      if (v > max + 1e-9 * max) break;
      out("<line class=\"{0}\" x1=\"{1}\" y1=\"{2:.2f}\" x2=\"{3}\" y2=\"{2:.2f}\" "
          "stroke=\"#e3e3e3\"/>\n",
          cls, kLeft, to_y(v), kRight);
      out("<text class=\"{}\" x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\" "
          "dominant-baseline=\"middle\">{}</text>\n",
          cls, kLeft - 6, to_y(v), bytes_label(v, u.size, u.name));
    }
  };
  out("<g id=\"memory-axis\" font-size=\"11\" fill=\"#333\">\n");
  byte_ticks("ytick", top_max, ystep, y, bu);
  out("<text x=\"22\" y=\"{0}\" font-size=\"12\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 22 {0})\">device memory</text>\n",
      (kTopY0 + kTopY1) / 2);
  out("</g>\n");

  // The curve as a step line: y in hundredths of a pixel, x in columns a tenth of a pixel wide.
  // A long iteration has hundreds of thousands of changes, many within one column: of the points
  // in a column only the first, the lowest, the highest and the last change the picture (the
  // vertical line they draw), so the file grows with the picture's width, not with the trace (a
  // 200,000-launch trace drew 19 MB, most of it repeated points; 0.4 MB now).
  auto step_points = [&](const std::vector<std::pair<double, std::uint64_t>>& pts) {
    std::string r;
    auto hundredths = [](double v) { return static_cast<long long>(std::llround(v * 100)); };
    long long last_x = 0, last_y = 0;
    bool any = false;
    auto emit = [&](long long px, long long py) {
      if (any && px == last_x && py == last_y) return;
      r += fmt::format("{}{}.{:02},{}.{:02}", any ? " " : "", px / 100, px % 100, py / 100,
                       py % 100);
      last_x = px, last_y = py, any = true;
    };
    // The column being gathered: its x and, in the order they came, its first, lowest, highest
    // and last y.
    long long col = 0, first = 0, low = 0, high = 0, last = 0;
    bool low_first = true, open = false;
    auto flush = [&] {
      if (!open) return;
      emit(col, first);
      emit(col, low_first ? low : high);
      emit(col, low_first ? high : low);
      emit(col, last);
    };
    for (const auto& [t, bytes] : pts) {
      const long long px = (hundredths(x(std::min(t, duration))) + 5) / 10 * 10;  // tenths
      const long long py = hundredths(y(static_cast<double>(bytes)));
      if (!open || px != col) {
        // A step: the level before holds up to this column.
        flush();
        if (open) emit(px, last);
        col = px, first = low = high = last = py, low_first = true, open = true;
        continue;
      }
      if (py < low) low = py, low_first = false;  // (screen y grows downwards)
      if (py > high) high = py, low_first = true;
      last = py;
    }
    flush();
    if (open) emit(hundredths(x(duration)), last);
    return r;
  };
  if (!c.live.empty()) {
    const std::string pts = step_points(c.live);
    out("<polygon id=\"live-area\" points=\"{:.2f},{:.2f} {} {:.2f},{:.2f}\" fill=\"{}\" "
        "fill-opacity=\"0.35\" stroke=\"none\"/>\n",
        x(0), y(0), pts, x(duration), y(0), kLiveColor);
    out("<polyline id=\"live\" points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
        pts, kLiveColor);
  }
  if (!c.resident.empty())
    out("<polyline id=\"resident\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"2\"/>\n",
        step_points(c.resident), kResidentColor);
  out("<line id=\"budget\" x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"{3}\" "
      "stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n",
      kLeft, y(static_cast<double>(p.budget)), kRight, kBudgetColor);
  out("<text x=\"{}\" y=\"{:.2f}\" font-size=\"11\" text-anchor=\"end\" fill=\"{}\">budget "
      "{}</text>\n",
      kRight - 4, y(static_cast<double>(p.budget)) - 5, kBudgetColor,
      bytes_label(static_cast<double>(p.budget), bu.size, bu.name));
  out("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", kLeft,
      kTopY0, kRight - kLeft, kTopY1 - kTopY0);

  // Swap traffic panel: per bucket, bytes out (left half) and in (right half).
  const SwapTraffic& tr = p.traffic;
  double tmax = 0;
  for (double v : tr.out_bytes) tmax = std::max(tmax, v);
  for (double v : tr.in_bytes) tmax = std::max(tmax, v);
  tmax = tmax > 0 ? tmax * 1.1 : 1.0 * (1 << 20);
  const Unit su = bytes_unit(tmax);
  const double sstep = nice_step(tmax / su.size, 3) * su.size;
  auto ys = [&](double bytes) { return kBottomY1 - (kBottomY1 - kBottomY0) * bytes / tmax; };
  out("<g id=\"traffic-axis\" font-size=\"11\" fill=\"#333\">\n");
  byte_ticks("stick", tmax, sstep, ys, su);
  out("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#333\">swap traffic: bytes moved per {} "
      "{} bucket</text>\n",
      kLeft, kBottomY0 - 8, number(tr.bucket_us / tu.size), tu.name);
  out("</g>\n");
  const double bw = (kRight - kLeft) * tr.bucket_us / duration;
  auto bars = [&](const char* id, const std::vector<double>& v, double shift, const char* color) {
    out("<g id=\"{}\" fill=\"{}\">\n", id, color);
    for (std::size_t k = 0; k < v.size(); ++k) {
      if (v[k] <= 0) continue;
      const double bx = kLeft + bw * static_cast<double>(k) + shift * bw / 2 + bw * 0.05;
      const double top = ys(v[k]);
      out("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\"><title>{}</title>"
          "</rect>\n",
          bx, top, std::max(0.5, bw * 0.4), kBottomY1 - top, bytes_label(v[k], su.size, su.name));
    }
    out("</g>\n");
  };
  bars("swap-out", tr.out_bytes, 0, kOutColor);
  bars("swap-in", tr.in_bytes, 1, kInColor);
  out("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n", kLeft,
      kBottomY0, kRight - kLeft, kBottomY1 - kBottomY0);

  // Time axis, shared by both panels (labels under the lower one).
  const double xstep = nice_step(duration / tu.size, 10) * tu.size;
  out("<g id=\"time-axis\" font-size=\"11\" fill=\"#333\">\n");
  for (int k = 0; k <= kMaxTicks; ++k) {
    const double t = k * xstep;
    if (t > duration + 1e-9 * duration) break;
    out("<line class=\"xtick\" x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" "
        "stroke=\"#888\"/>\n",
        x(t), kBottomY1, kBottomY1 + 5);
    out("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"#888\"/>\n", x(t),
        kTopY1, kTopY1 + 5);
    out("<text class=\"xtick\" x=\"{:.2f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x(t),
        kBottomY1 + 18, number(t / tu.size) + " " + tu.name);
  }
  out("<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">time in the iteration "
      "({})</text>\n",
      (kLeft + kRight) / 2, kBottomY1 + 44, tu.name);
  out("</g>\n</svg>\n");
  return s;
}

}  // namespace gswap::policy
