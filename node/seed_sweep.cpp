#include "node/seed_sweep.h"

#include "core/json_writer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <set>
#include <string>

namespace fednode {

MeanSd mean_sd(const std::vector<double>& values) {
  MeanSd m;
  m.count = static_cast<int>(values.size());
  if (values.empty()) {
    m.mean = m.sd = NAN;
    return m;
  }
  // Equal values give exactly that value and sd 0, not a rounding residue of the division.
  if (std::all_of(values.begin(), values.end(), [&](double v) { return v == values.front(); })) {
    m.mean = values.front();
    m.sd = values.size() < 2 ? NAN : 0.0;
    return m;
  }
  for (double v : values) m.mean += v;
  m.mean /= static_cast<double>(values.size());  // two or more values from here on
  double squares = 0;
  for (double v : values) squares += (v - m.mean) * (v - m.mean);
  m.sd = std::sqrt(squares / static_cast<double>(values.size() - 1));
  return m;
}

namespace {

void summarize(SeedSweepReport& sweep) {
  const auto& runs = sweep.runs;
  sweep.has_baselines = runs.front().has_baselines;
  std::vector<double> linear, lda;
  for (const auto& r : runs) {
    linear.push_back(r.centralized_linear);
    lda.push_back(r.centralized_lda);
  }
  if (sweep.has_baselines) {
    sweep.centralized_linear = mean_sd(linear);
    sweep.centralized_lda = mean_sd(lda);
  }
  // Every run has the same node ids (the count does not depend on the seed; a graph topology's
  // random DAG does, so a node's spread there also covers its place in the graph).
  for (size_t i = 0; i < runs.front().nodes.size(); ++i) {
    std::vector<double> accuracy, gap, local_only;
    for (const auto& r : runs) {
      const auto& n = r.nodes[i];
      accuracy.push_back(n.accuracy);
      if (sweep.has_baselines) {
        gap.push_back(n.accuracy - r.centralized_linear);
        local_only.push_back(n.local_only_accuracy);
      }
    }
    SeedSweepNode s;
    s.id = runs.front().nodes[i].id;
    s.accuracy = mean_sd(accuracy);
    s.minus_centralized_linear = mean_sd(gap);
    s.local_only = mean_sd(local_only);
    sweep.nodes.push_back(s);
  }
}

void write_mean_sd(JsonWriter& w, const MeanSd& m) {
  w.begin_object();
  w.key("mean").value(m.mean);
  w.key("sd").value(m.sd);
  w.end_object();
}

}  // namespace

SeedSweepReport simulate_seeds(const FeatureRows& train, const Features& test, SimulationOptions options,
                               const std::vector<uint64_t>& seeds) {
  if (seeds.empty()) throw InputError("a seed sweep needs at least one seed");
  if (std::set<uint64_t>(seeds.begin(), seeds.end()).size() != seeds.size())
    throw InputError("a seed sweep's seeds must be distinct (a repeated seed repeats a run and weighs it twice)");
  const auto start = std::chrono::steady_clock::now();
  SeedSweepReport sweep;
  sweep.seeds = seeds;
  const auto progress = options.progress;
  for (size_t k = 0; k < seeds.size(); ++k) {
    if (progress)
      progress("seed " + std::to_string(seeds[k]) + " (" + std::to_string(k + 1) + " of " +
               std::to_string(seeds.size()) + ")");
    options.seed = seeds[k];
    options.partition.seed = seeds[k];
    sweep.runs.push_back(simulate(train, test, options));
  }
  summarize(sweep);
  sweep.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sweep;
}

void write_seed_sweep_json(const SeedSweepReport& s, std::ostream& out) {
  JsonWriter w(out);
  w.begin_object();
  w.key("fednode_seed_sweep").value(1);
  w.key("seeds").array(s.seeds);
  w.key("summary").begin_object();
  if (s.has_baselines) {
    w.key("centralized").begin_object();
    w.key("linear");
    write_mean_sd(w, s.centralized_linear);
    w.key("lda");
    write_mean_sd(w, s.centralized_lda);
    w.end_object();
  } else {
    w.key("centralized").null();
  }
  w.key("nodes").begin_array();
  for (const auto& n : s.nodes) {
    w.begin_object();
    w.key("id").value(n.id);
    w.key("accuracy");
    write_mean_sd(w, n.accuracy);
    if (s.has_baselines) {
      w.key("minus_centralized_linear");
      write_mean_sd(w, n.minus_centralized_linear);
      w.key("local_only_accuracy");
      write_mean_sd(w, n.local_only);
    }
    w.end_object();
  }
  w.end_array();
  w.end_object();
  w.key("runs").begin_array();
  for (const auto& r : s.runs) write_report(w, r);
  w.end_array();
  w.key("wall_time_seconds").value(s.wall_seconds);
  w.end_object();
}

void print_seed_sweep_table(const SeedSweepReport& s, std::ostream& out) {
  const auto& first = s.runs.front();
  const auto& o = first.options;
  out << o.method.method << " over a " << to_string(o.topology) << " of " << first.nodes.size()
      << " nodes, partition " << to_string(o.partition.scheme);
  if (o.partition.scheme == PartitionScheme::Dirichlet) out << " (alpha " << o.partition.dirichlet_alpha << ")";
  out << ", " << s.seeds.size() << (s.seeds.size() == 1 ? " seed\n" : " seeds\n");
  char line[256];
  for (const auto& r : s.runs) {
    double lo = 1, hi = 0;
    for (const auto& n : r.nodes) {
      lo = std::min(lo, n.accuracy);
      hi = std::max(hi, n.accuracy);
    }
    if (s.has_baselines)
      std::snprintf(line, sizeof line, "seed %-6llu nodes %.4f to %.4f   centralised: linear %.4f, lda %.4f\n",
                    static_cast<unsigned long long>(r.options.seed), lo, hi, r.centralized_linear,
                    r.centralized_lda);
    else
      std::snprintf(line, sizeof line, "seed %-6llu nodes %.4f to %.4f\n",
                    static_cast<unsigned long long>(r.options.seed), lo, hi);
    out << line;
  }
  // Gaps in points (hundredths), as the papers and docs/methods state them.
  std::snprintf(line, sizeof line, "%-5s %20s %27s %19s\n", "node", "accuracy (mean, sd)",
                "minus linear, points (sd)", "local-only (mean)");
  out << line;
  // A single seed has no sd: "-", not "nan".
  const auto sd_text = [](double sd, double scale, const char* format) {
    if (std::isnan(sd)) return std::string("-");
    char t[32];
    std::snprintf(t, sizeof t, format, scale * sd);
    return std::string(t);
  };
  for (const auto& n : s.nodes) {
    std::string gap = "-", local = "-";
    if (s.has_baselines) {
      char g[64];
      std::snprintf(g, sizeof g, "%+.2f (%s)", 100 * n.minus_centralized_linear.mean,
                    sd_text(n.minus_centralized_linear.sd, 100, "%.2f").c_str());
      gap = g;
      std::snprintf(g, sizeof g, "%.4f", n.local_only.mean);
      local = g;
    }
    std::snprintf(line, sizeof line, "%-5u %11.4f (%6s) %27s %19s\n", n.id, n.accuracy.mean,
                  sd_text(n.accuracy.sd, 1, "%.4f").c_str(), gap.c_str(), local.c_str());
    out << line;
  }
  if (s.has_baselines) {
    std::snprintf(line, sizeof line, "centralised: linear %.4f (sd %s), lda %.4f (sd %s)\n",
                  s.centralized_linear.mean, sd_text(s.centralized_linear.sd, 1, "%.4f").c_str(),
                  s.centralized_lda.mean, sd_text(s.centralized_lda.sd, 1, "%.4f").c_str());
    out << line;
  }
  std::snprintf(line, sizeof line, "wall time %.1f s\n", s.wall_seconds);
  out << line;
}

}  // namespace fednode
