#include "features/partition.h"

#include "core/rng.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace fednode {
namespace {

// The reference code loops until the draw is acceptable; bounded here so impossible settings
// end with an explanation instead of spinning forever.
constexpr int kMaxDirichletAttempts = 1000;

void shuffle(std::vector<int64_t>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// numpy.array_split: the first (n % parts) parts get one extra element.
std::vector<std::vector<int64_t>> split_evenly(const std::vector<int64_t>& v, size_t parts) {
  std::vector<std::vector<int64_t>> out(parts);
  const size_t base = v.size() / parts, extra = v.size() % parts;
  size_t pos = 0;
  for (size_t p = 0; p < parts; ++p) {
    const size_t len = base + (p < extra ? 1 : 0);
    out[p].assign(v.begin() + static_cast<std::ptrdiff_t>(pos),
                  v.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  }
  return out;
}

// Rows of each class, in dataset order.
std::vector<std::vector<int64_t>> rows_by_class(const Labels& y, int num_classes) {
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < y.size(); ++i) by_class[static_cast<size_t>(y[i])].push_back(static_cast<int64_t>(i));
  return by_class;
}

std::vector<int> present_classes(const std::vector<std::vector<int64_t>>& by_class) {
  std::vector<int> out;
  for (size_t c = 0; c < by_class.size(); ++c)
    if (!by_class[c].empty()) out.push_back(static_cast<int>(c));
  return out;
}

// Dir(alpha) over k entries from normalised Gamma(alpha) draws. For alpha < 1 the gamma draw is
// boosted as Gamma(alpha+1) * U^(1/alpha), exactly as Rng::gamma does, but kept in log space:
// for small alpha U^(1/alpha) underflows to 0 for every entry, which would leave nothing to
// normalise.
std::vector<double> dirichlet(Rng& rng, double alpha, size_t k) {
  std::vector<double> logs(k);
  for (double& l : logs) {
    if (alpha < 1.0) {
      const double u = rng.uniform();
      const double g = rng.gamma(alpha + 1.0);
      l = std::log(g) + std::log(u > 0 ? u : 1e-300) / alpha;
    } else {
      l = std::log(rng.gamma(alpha));
    }
  }
  const double top = *std::max_element(logs.begin(), logs.end());
  std::vector<double> p(k);
  double sum = 0;
  for (size_t j = 0; j < k; ++j) sum += (p[j] = std::exp(logs[j] - top));
  for (double& v : p) v /= sum;
  return p;
}

Partition partition_iid(const Labels& y, int nodes, Rng& rng) {
  std::vector<int64_t> all(y.size());
  std::iota(all.begin(), all.end(), 0);
  shuffle(all, rng);
  return split_evenly(all, static_cast<size_t>(nodes));
}

Partition partition_dirichlet(const Labels& y, int num_classes, const PartitionOptions& opt,
                              Rng& rng) {
  const auto by_class = rows_by_class(y, num_classes);
  const size_t nodes = static_cast<size_t>(opt.nodes);
  const double fair_share = static_cast<double>(y.size()) / static_cast<double>(nodes);
  int64_t smallest = 0;
  for (int attempt = 0; attempt < kMaxDirichletAttempts; ++attempt) {
    Partition parts(nodes);
    for (int c = 0; c < num_classes; ++c) {
      std::vector<int64_t> rows = by_class[static_cast<size_t>(c)];
      shuffle(rows, rng);
      const std::vector<double> raw = dirichlet(rng, opt.dirichlet_alpha, nodes);
      std::vector<double> p = raw;
      // The reference's balancing: a node already above its fair share gets no more.
      double sum = 0;
      for (size_t j = 0; j < nodes; ++j) {
        if (static_cast<double>(parts[j].size()) >= fair_share) p[j] = 0;
        sum += p[j];
      }
      if (sum <= 0) {
        // Every node still below its share drew a weight that underflowed to zero (tiny
        // alpha); numpy would divide by zero here. Use the uncapped draw instead.
        p = raw;
        sum = 1;
      }
      // Split points floor(cumsum(p) * len), as numpy's astype(int) on the reference's cumsum.
      double cum = 0;
      size_t start = 0;
      for (size_t j = 0; j < nodes; ++j) {
        size_t end = rows.size();
        if (j + 1 < nodes) {
          cum += p[j] / sum;
          end = std::min(rows.size(), static_cast<size_t>(std::floor(cum * static_cast<double>(rows.size()))));
          end = std::max(end, start);
        }
        parts[j].insert(parts[j].end(), rows.begin() + static_cast<std::ptrdiff_t>(start),
                        rows.begin() + static_cast<std::ptrdiff_t>(end));
        start = end;
      }
    }
    smallest = static_cast<int64_t>(parts[0].size());
    for (const auto& part : parts) smallest = std::min<int64_t>(smallest, static_cast<int64_t>(part.size()));
    if (smallest >= opt.min_samples) return parts;
  }
  std::ostringstream msg;
  msg << "dirichlet partition: after " << kMaxDirichletAttempts
      << " draws some node still held fewer than min_samples=" << opt.min_samples << " rows (last draw's smallest: "
      << smallest << ") with alpha=" << opt.dirichlet_alpha << ", " << opt.nodes << " nodes and "
      << y.size() << " samples; raise alpha, lower min_samples or use fewer nodes";
  throw InputError(msg.str());
}

// Which classes every node holds (shards) or is dominated by (dominant): each node takes the
// classes_per_node least-used classes so far, ties broken at random. Per class, its holders.
std::vector<std::vector<size_t>> choose_class_holders(const std::vector<int>& classes, int num_classes,
                                                      const PartitionOptions& opt, Rng& rng, const char* scheme) {
  const size_t nodes = static_cast<size_t>(opt.nodes);
  const size_t per_node = static_cast<size_t>(opt.classes_per_node);
  if (per_node > classes.size())
    throw InputError(std::string(scheme) + " partition: classes_per_node=" + std::to_string(per_node) +
                     " but only " + std::to_string(classes.size()) +
                     " classes occur in the labels");
  // Each node takes the classes_per_node least-used classes so far, ties broken at random.
  // Usage counts then never differ by more than one, so every class is held by someone once
  // nodes * classes_per_node >= classes, and the random ties keep the class sets of different
  // nodes varied instead of repeating one fixed pattern.
  std::vector<size_t> usage(static_cast<size_t>(num_classes), 0);
  std::vector<std::vector<size_t>> holders(static_cast<size_t>(num_classes));
  for (size_t k = 0; k < nodes; ++k) {
    std::vector<int> order = classes;
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return usage[static_cast<size_t>(a)] < usage[static_cast<size_t>(b)];
    });
    for (size_t j = 0; j < per_node; ++j) {
      ++usage[static_cast<size_t>(order[j])];
      holders[static_cast<size_t>(order[j])].push_back(k);
    }
  }
  return holders;
}

Partition partition_shards(const Labels& y, int num_classes, const PartitionOptions& opt, Rng& rng) {
  const auto by_class = rows_by_class(y, num_classes);
  const auto holders = choose_class_holders(present_classes(by_class), num_classes, opt, rng, "shards");
  Partition parts(static_cast<size_t>(opt.nodes));
  for (int c = 0; c < num_classes; ++c) {
    const auto& who = holders[static_cast<size_t>(c)];
    if (who.empty()) continue;
    std::vector<int64_t> rows = by_class[static_cast<size_t>(c)];
    if (rows.size() < who.size())
      throw InputError("shards partition: class " + std::to_string(c) + " has " +
                       std::to_string(rows.size()) + " samples but " + std::to_string(who.size()) +
                       " nodes must share it; use fewer nodes or fewer classes per node");
    shuffle(rows, rng);
    const auto pieces = split_evenly(rows, who.size());
    for (size_t h = 0; h < who.size(); ++h)
      parts[who[h]].insert(parts[who[h]].end(), pieces[h].begin(), pieces[h].end());
  }
  // Classes nobody was given (nodes * classes_per_node < classes) are left out, as in FedTC.
  return parts;
}

Partition partition_dominant(const Labels& y, int num_classes, const PartitionOptions& opt, Rng& rng) {
  auto by_class = rows_by_class(y, num_classes);
  const std::vector<int> classes = present_classes(by_class);
  const auto holders = choose_class_holders(classes, num_classes, opt, rng, "dominant");
  for (auto& rows : by_class) shuffle(rows, rng);
  std::vector<size_t> taken(by_class.size(), 0);
  auto take = [&](int c, int64_t want, std::vector<int64_t>& into) {
    auto& rows = by_class[static_cast<size_t>(c)];
    size_t& used = taken[static_cast<size_t>(c)];
    const size_t n = std::min(rows.size() - used, static_cast<size_t>(std::max<int64_t>(want, 0)));
    into.insert(into.end(), rows.begin() + static_cast<std::ptrdiff_t>(used), rows.begin() + static_cast<std::ptrdiff_t>(used + n));
    used += n;
  };
  const int64_t size = static_cast<int64_t>(y.size()) / opt.nodes;
  const int64_t uniform = std::llround(opt.uniform_share * static_cast<double>(size));
  const int64_t C = static_cast<int64_t>(classes.size());
  Partition parts(static_cast<size_t>(opt.nodes));
  // The uniform shares first, so that every node gets its share of every class before the
  // dominant ones draw the rest.
  for (auto& part : parts)
    for (int64_t j = 0; j < C; ++j) take(classes[static_cast<size_t>(j)], uniform / C + (j < uniform % C ? 1 : 0), part);
  for (size_t k = 0; k < parts.size(); ++k) {
    std::vector<int> dominant;
    for (int c = 0; c < num_classes; ++c)
      for (size_t h : holders[static_cast<size_t>(c)])
        if (h == k) dominant.push_back(c);
    const int64_t rest = size - uniform, D = static_cast<int64_t>(dominant.size());
    for (int64_t j = 0; j < D; ++j) take(dominant[static_cast<size_t>(j)], rest / D + (j < rest % D ? 1 : 0), parts[k]);
  }
  return parts;
}

Partition partition_labels(const Labels& y, int num_classes, const PartitionOptions& opt, Rng& rng) {
  const auto by_class = rows_by_class(y, num_classes);
  std::vector<int> classes = present_classes(by_class);
  if (static_cast<size_t>(opt.nodes) > classes.size())
    throw InputError("labels partition: " + std::to_string(opt.nodes) +
                     " nodes need at least as many classes, but only " +
                     std::to_string(classes.size()) + " occur in the labels");
  for (size_t i = classes.size(); i > 1; --i) std::swap(classes[i - 1], classes[rng.below(i)]);
  Partition parts(static_cast<size_t>(opt.nodes));
  const size_t base = classes.size() / parts.size(), extra = classes.size() % parts.size();
  size_t pos = 0;
  for (size_t k = 0; k < parts.size(); ++k)
    for (size_t j = 0; j < base + (k < extra ? 1 : 0); ++j) {
      const auto& rows = by_class[static_cast<size_t>(classes[pos++])];
      parts[k].insert(parts[k].end(), rows.begin(), rows.end());
    }
  return parts;
}

}  // namespace

PartitionScheme parse_partition_scheme(const std::string& s) {
  if (s == "iid") return PartitionScheme::Iid;
  if (s == "dirichlet") return PartitionScheme::Dirichlet;
  if (s == "shards") return PartitionScheme::Shards;
  if (s == "labels") return PartitionScheme::Labels;
  if (s == "dominant") return PartitionScheme::Dominant;
  throw InputError("unknown partition scheme '" + s + "' (expected iid, dirichlet, shards, labels or dominant)");
}

const char* to_string(PartitionScheme scheme) {
  switch (scheme) {
    case PartitionScheme::Iid: return "iid";
    case PartitionScheme::Dirichlet: return "dirichlet";
    case PartitionScheme::Shards: return "shards";
    case PartitionScheme::Labels: return "labels";
    case PartitionScheme::Dominant: return "dominant";
  }
  return "unknown";
}

Partition make_partition(const Labels& y, int num_classes, const PartitionOptions& opt) {
  const std::string what = std::string(to_string(opt.scheme)) + " partition: ";
  if (num_classes < 1) throw InputError(what + "number of classes must be at least 1");
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i] < 0 || y[i] >= num_classes)
      throw InputError(what + "label " + std::to_string(y[i]) + " at row " + std::to_string(i) +
                       " is outside [0, " + std::to_string(num_classes) + ")");
  if (opt.nodes < 1) throw InputError(what + "nodes must be at least 1, got " + std::to_string(opt.nodes));
  if (static_cast<size_t>(opt.nodes) > y.size())
    throw InputError(what + std::to_string(opt.nodes) + " nodes but only " +
                     std::to_string(y.size()) + " samples; every node needs at least one");
  if (opt.scheme == PartitionScheme::Dirichlet) {
    if (!(opt.dirichlet_alpha > 0) || !std::isfinite(opt.dirichlet_alpha))
      throw InputError(what + "dirichlet alpha must be a positive number, got " +
                       std::to_string(opt.dirichlet_alpha));
    if (opt.min_samples < 0)
      throw InputError(what + "min_samples must be non-negative, got " + std::to_string(opt.min_samples));
    if (static_cast<int64_t>(opt.min_samples) * opt.nodes > static_cast<int64_t>(y.size()))
      throw InputError(what + std::to_string(opt.nodes) + " nodes with min_samples=" +
                       std::to_string(opt.min_samples) + " need " +
                       std::to_string(static_cast<int64_t>(opt.min_samples) * opt.nodes) +
                       " samples, the data has " + std::to_string(y.size()));
  }
  if ((opt.scheme == PartitionScheme::Shards || opt.scheme == PartitionScheme::Dominant) &&
      (opt.classes_per_node < 1 || opt.classes_per_node > num_classes))
    throw InputError(what + "classes_per_node must be in [1, " + std::to_string(num_classes) +
                     "], got " + std::to_string(opt.classes_per_node));

  Rng rng = Rng::stream(opt.seed, Purpose::Partition, static_cast<uint64_t>(opt.scheme));
  Partition parts;
  switch (opt.scheme) {
    case PartitionScheme::Iid: parts = partition_iid(y, opt.nodes, rng); break;
    case PartitionScheme::Dirichlet: parts = partition_dirichlet(y, num_classes, opt, rng); break;
    case PartitionScheme::Shards: parts = partition_shards(y, num_classes, opt, rng); break;
    case PartitionScheme::Labels: parts = partition_labels(y, num_classes, opt, rng); break;
    case PartitionScheme::Dominant:
      if (!(opt.uniform_share >= 0 && opt.uniform_share <= 1))
        throw InputError(what + "the uniform share must lie in [0, 1], got " + std::to_string(opt.uniform_share));
      parts = partition_dominant(y, num_classes, opt, rng);
      break;
  }
  for (auto& part : parts) std::sort(part.begin(), part.end());
  return parts;
}

std::vector<std::vector<int64_t>> partition_counts(const Partition& p, const Labels& y,
                                                   int num_classes) {
  if (num_classes < 1) throw InputError("partition counts: number of classes must be at least 1");
  std::vector<std::vector<int64_t>> counts(p.size(), std::vector<int64_t>(static_cast<size_t>(num_classes), 0));
  for (size_t k = 0; k < p.size(); ++k)
    for (int64_t row : p[k]) {
      if (row < 0 || static_cast<size_t>(row) >= y.size())
        throw InputError("partition counts: node " + std::to_string(k) + " holds row " +
                         std::to_string(row) + ", outside the " + std::to_string(y.size()) + " samples");
      const int32_t label = y[static_cast<size_t>(row)];
      if (label < 0 || label >= num_classes)
        throw InputError("partition counts: label " + std::to_string(label) + " at row " +
                         std::to_string(row) + " is outside [0, " + std::to_string(num_classes) + ")");
      ++counts[k][static_cast<size_t>(label)];
    }
  return counts;
}

std::string format_partition_summary(const std::vector<std::vector<int64_t>>& counts) {
  size_t classes = 0;
  for (const auto& row : counts) classes = std::max(classes, row.size());
  std::vector<int64_t> class_totals(classes, 0);
  std::vector<int64_t> node_totals(counts.size(), 0);
  std::vector<int64_t> node_classes(counts.size(), 0);
  for (size_t k = 0; k < counts.size(); ++k)
    for (size_t c = 0; c < counts[k].size(); ++c) {
      class_totals[c] += counts[k][c];
      node_totals[k] += counts[k][c];
      node_classes[k] += counts[k][c] > 0;
    }
  const int64_t total = std::accumulate(node_totals.begin(), node_totals.end(), int64_t{0});
  // One width for every count column keeps the table aligned whatever the class count.
  const size_t w = std::max<size_t>(std::to_string(total).size(),
                                    std::to_string(classes > 0 ? classes - 1 : 0).size() + 1) + 1;
  auto cell = [](std::ostringstream& os, const std::string& s, size_t width) {
    os << std::string(width > s.size() ? width - s.size() : 0, ' ') << s;
  };
  std::ostringstream os;
  cell(os, "node", 6);
  cell(os, "samples", std::max<size_t>(w, 8));
  cell(os, "classes", 8);
  os << " |";
  for (size_t c = 0; c < classes; ++c) cell(os, "c" + std::to_string(c), w);
  os << '\n';
  for (size_t k = 0; k < counts.size(); ++k) {
    cell(os, std::to_string(k), 6);
    cell(os, std::to_string(node_totals[k]), std::max<size_t>(w, 8));
    cell(os, std::to_string(node_classes[k]), 8);
    os << " |";
    for (size_t c = 0; c < classes; ++c)
      cell(os, std::to_string(c < counts[k].size() ? counts[k][c] : 0), w);
    os << '\n';
  }
  int64_t used = 0;
  for (int64_t t : class_totals) used += t > 0;
  cell(os, "total", 6);
  cell(os, std::to_string(total), std::max<size_t>(w, 8));
  cell(os, std::to_string(used), 8);
  os << " |";
  for (size_t c = 0; c < classes; ++c) cell(os, std::to_string(class_totals[c]), w);
  os << '\n';
  return os.str();
}

}  // namespace fednode
