#pragma once
// Loss curves of several runs in one figure: loss against step (left) and against wall time
// (right). A PNG through gnuplot when it is installed; otherwise an SVG written directly.
// Example support, not part of the library.
#include <locus/train/data_parallel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace example {

struct curve {
  std::string label;
  std::vector<locus::train::progress> points;
};

/// The loss smoothed by an exponential moving average (the per-batch loss is noisy).
inline std::vector<double> smoothed(const curve& c, double keep = 0.9) {
  std::vector<double> out;
  double ema = 0;
  for (std::size_t i = 0; i < c.points.size(); ++i) {
    ema = i == 0 ? c.points[i].loss : keep * ema + (1 - keep) * c.points[i].loss;
    out.push_back(ema);
  }
  return out;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Writes an SVG with two panels. Returns the path written.
inline std::string write_svg(const std::string& path, const std::vector<curve>& curves) {
  const double W = 960, H = 380, panel_w = 420, panel_h = 280, top = 50, left0 = 60, gap = 480;
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  double loss_max = 0, step_max = 1, time_max = 1e-9;
  for (const auto& c : curves) {
    for (double l : smoothed(c)) loss_max = std::max(loss_max, l);
    if (!c.points.empty()) {
      step_max = std::max(step_max, double(c.points.back().step));
      for (const auto& p : c.points) time_max = std::max(time_max, p.wall_seconds);
    }
  }
  if (!(loss_max > 0)) loss_max = 1;
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H);
  out << buf;
  for (int panel = 0; panel < 2; ++panel) {
    const double x0 = left0 + panel * gap, y0 = top;
    const double xmax = panel == 0 ? step_max : time_max;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n"
                  "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n"
                  "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">0</text>\n"
                  "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%.4g</text>\n"
                  "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.3g</text>\n"
                  "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>\n"
                  "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">loss (moving average) against %s</text>\n",
                  x0, y0, panel_w, panel_h, x0 + panel_w / 2, y0 + panel_h + 32, panel == 0 ? "step" : "wall time (s)",
                  x0, y0 + panel_h + 16, x0 + panel_w, y0 + panel_h + 16, xmax, x0 - 6, y0 + 10, loss_max, x0 - 6,
                  y0 + panel_h, x0 + panel_w / 2, y0 - 12, panel == 0 ? "step" : "wall time");
    out << buf;
    for (std::size_t c = 0; c < curves.size(); ++c) {
      const auto loss = smoothed(curves[c]);
      out << "<polyline fill=\"none\" stroke=\"" << colors[c % 4] << "\" stroke-width=\"1.5\" points=\"";
      for (std::size_t i = 0; i < loss.size(); ++i) {
        const auto& p = curves[c].points[i];
        const double x = x0 + panel_w * (panel == 0 ? double(p.step) : p.wall_seconds) / xmax;
        const double y = y0 + panel_h * (1 - loss[i] / loss_max);
        std::snprintf(buf, sizeof buf, "%.1f,%.1f ", x, y);
        out << buf;
      }
      out << "\"/>\n";
      if (panel == 0) {
        std::snprintf(buf, sizeof buf,
                      "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"/>"
                      "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                      x0 + panel_w - 150, y0 + 18 + 16 * double(c), x0 + panel_w - 130, y0 + 18 + 16 * double(c),
                      colors[c % 4], x0 + panel_w - 125, y0 + 22 + 16 * double(c), curves[c].label.c_str());
        out << buf;
      }
    }
  }
  out << "</svg>\n";
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

/// Writes a PNG through gnuplot. Returns false when gnuplot is not installed or failed.
inline bool write_png(const std::string& path, const std::vector<curve>& curves) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) return false;
  const std::string data = path + ".dat", script = path + ".gp";
  {
    std::ofstream d(data);
    for (const auto& c : curves) {
      const auto loss = smoothed(c);
      for (std::size_t i = 0; i < loss.size(); ++i)
        d << c.points[i].step << ' ' << c.points[i].wall_seconds << ' ' << loss[i] << '\n';
      d << "\n\n";  // one gnuplot data block per curve
    }
  }
  {
    std::ofstream g(script);
    g << "set terminal pngcairo size 960,380\nset output '" << path << "'\nset multiplot layout 1,2\n"
      << "set ylabel 'loss (moving average)'\n";
    for (int panel = 0; panel < 2; ++panel) {
      g << "set xlabel '" << (panel == 0 ? "step" : "wall time (s)") << "'\nplot ";
      for (std::size_t c = 0; c < curves.size(); ++c)
        g << (c ? ", " : "") << "'" << data << "' index " << c << " using " << (panel == 0 ? 1 : 2)
          << ":3 with lines title '" << curves[c].label << "'";
      g << "\n";
    }
    g << "unset multiplot\n";
  }
  const bool ok = std::system(("gnuplot '" + script + "' 2> /dev/null").c_str()) == 0;
  std::remove(data.c_str());
  std::remove(script.c_str());
  return ok;
}

/// A PNG when the path ends in .png and gnuplot is there; an SVG otherwise (the .png name becomes
/// .svg). Returns the file written.
inline std::string write_plot(std::string path, const std::vector<curve>& curves) {
  if (ends_with(path, ".png")) {
    if (write_png(path, curves)) return path;
    path = path.substr(0, path.size() - 4) + ".svg";
  }
  return write_svg(path, curves);
}

}  // namespace example
