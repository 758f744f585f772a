// Platform M_X: tables, interpolation, JSON with provenance, embedded presets.
#include "xstage/model/platform.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "xstage/common/atomic_file.hpp"
#include "xstage/common/error.hpp"

namespace xstage::model {
namespace {

struct PresetText {
  const char* name;
  const char* json;
};
constexpr PresetText kPresets[] = {
#include "xstage/model/presets.inc"
};

// Linear interpolation of y(x) over points sorted by x. Below the first point: the first value.
// Above the last: proportional extension y = y_last * x / x_last (see Platform::tiss0).
double interp_row(const std::vector<Tiss0Point>& row, double V) {
  if (V <= row.front().V) return row.front().tiss0;
  if (V >= row.back().V) return row.back().tiss0 * V / row.back().V;
  for (size_t i = 1; i < row.size(); ++i) {
    if (V <= row[i].V) {
      const auto& a = row[i - 1];
      const auto& b = row[i];
      double t = (V - a.V) / (b.V - a.V);
      return a.tiss0 + t * (b.tiss0 - a.tiss0);
    }
  }
  return row.back().tiss0;
}

double num(const nlohmann::json& j, const char* key, const std::string& where) {
  XSTAGE_REQUIRE(j.contains(key), "platform JSON: missing field '", key, "' in ", where);
  XSTAGE_REQUIRE(j.at(key).is_number(), "platform JSON: field '", key, "' in ", where,
                 " must be a number, got ", j.at(key).dump());
  double v = j.at(key).get<double>();
  XSTAGE_REQUIRE(std::isfinite(v), "platform JSON: field '", key, "' in ", where, " is not finite");
  return v;
}

// A whole number in [lo, hi] (checked before the conversion, so 2^64 is reported as itself).
int whole(const nlohmann::json& j, const char* key, const std::string& where, double lo, double hi) {
  const double v = num(j, key, where);
  XSTAGE_REQUIRE(v == std::floor(v) && v >= lo && v <= hi, "platform JSON: field '", key, "' in ", where,
                 " must be a whole number in ", lo, "..", hi, ", got ", j.at(key).dump());
  return int(v);
}

// A number in (0, hi] given in the JSON's unit (so 1e308 GB/s is reported as itself, not as inf bytes/s).
double positive(const nlohmann::json& j, const char* key, const std::string& where, double hi, const char* unit) {
  const double v = num(j, key, where);
  XSTAGE_REQUIRE(v > 0 && v <= hi, "platform JSON: field '", key, "' in ", where, " must be in (0, ", hi, "] ",
                 unit, ", got ", j.at(key).dump());
  return v;
}

std::string str(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return {};
  XSTAGE_REQUIRE(j.at(key).is_string(), "platform JSON: field '", key, "' must be a string");
  return j.at(key).get<std::string>();
}

// Every key of object j is one of `known` (a misspelt "world_sise" would otherwise load as no world size).
void only_keys(const nlohmann::json& j, std::initializer_list<const char*> known, const std::string& where) {
  for (const auto& item : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || item.key() == k;
    if (ok) continue;
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    throw UsageError("platform JSON: unknown key '" + item.key() + "' in " + where + " (known: " + list + ")");
  }
}

// Where s is not UTF-8 (JSON holds only UTF-8: a platform with such a name could not be written), the byte offset of
// the first bad sequence; -1 where it is.
long bad_utf8_at(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return long(i);
    for (int k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return long(i);
    i += n;
  }
  return -1;
}

// The bounds a platform file may hold (from_json) and a platform may have (validate), in the file's units: one
// table, so that what fit or refit writes is always a file the loader takes back.
constexpr double kMaxSm = 1e6, kMaxWorld = 1e6, kMaxK = 1e8;
constexpr double kMaxRGBps = 1e6, kMaxBytes = 1e15, kMaxTissUs = 1e9, kMaxTflops = 1e6, kMaxTBps = 1e3;
}  // namespace

std::vector<Tiss0Point> tiss0_row(const Platform& p, int K) {
  std::vector<Tiss0Point> row;
  for (const auto& e : p.tiss0_table)
    if (e.K == K) row.push_back(e);
  std::sort(row.begin(), row.end(), [](const auto& a, const auto& b) { return a.V < b.V; });
  return row;
}

double Platform::tiss0(int K, double V) const {
  XSTAGE_REQUIRE(K > 0, "T_iss^0: producer count K must be positive, got ", K);
  XSTAGE_REQUIRE(V > 0 && std::isfinite(V), "T_iss^0: burst volume V must be positive, got ", V);
  XSTAGE_REQUIRE(!tiss0_table.empty(), "platform '", name, "' has an empty T_iss^0 table");
  std::vector<int> ks;
  for (const auto& e : tiss0_table) ks.push_back(e.K);
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  if (K <= ks.front()) return interp_row(tiss0_row(*this, ks.front()), V);
  if (K >= ks.back()) return interp_row(tiss0_row(*this, ks.back()), V);
  auto hi = std::lower_bound(ks.begin(), ks.end(), K);
  if (*hi == K) return interp_row(tiss0_row(*this, K), V);
  int k1 = *(hi - 1), k2 = *hi;
  double a = interp_row(tiss0_row(*this, k1), V), b = interp_row(tiss0_row(*this, k2), V);
  return a + (b - a) * double(K - k1) / double(k2 - k1);
}

double Platform::Q(int K) const {
  XSTAGE_REQUIRE(K > 0, "Q(K): producer count K must be positive, got ", K);
  XSTAGE_REQUIRE(!q_table.empty(), "platform '", name, "' has an empty Q table");
  auto q = q_table;
  std::sort(q.begin(), q.end(), [](const auto& a, const auto& b) { return a.K < b.K; });
  if (K <= q.front().K) return q.front().Q;
  if (K >= q.back().K) return q.back().Q;
  for (size_t i = 1; i < q.size(); ++i)
    if (K <= q[i].K)
      return q[i - 1].Q + (q[i].Q - q[i - 1].Q) * double(K - q[i - 1].K) / double(q[i].K - q[i - 1].K);
  return q.back().Q;
}

void Platform::validate() const {
  XSTAGE_REQUIRE(!name.empty(), "platform: empty name");
  for (const auto& [text, what] : {std::pair{&name, "name"}, {&provenance.machine, "provenance machine"},
                                   {&provenance.date, "provenance date"}, {&provenance.command, "provenance command"},
                                   {&provenance.source, "provenance source"}, {&provenance.note, "provenance note"}}) {
    const long at = bad_utf8_at(*text);
    XSTAGE_REQUIRE(at < 0, "platform: the ", what, " is not UTF-8 (byte ", at, " of '", *text,
                   "'); a platform file holds UTF-8 text only");
  }
  XSTAGE_REQUIRE(sm_count > 0 && sm_count <= kMaxSm, "platform '", name, "': sm_count must be in 1..", kMaxSm,
                 ", got ", sm_count);
  XSTAGE_REQUIRE(world_size >= 0 && world_size <= kMaxWorld, "platform '", name, "': world_size must be in 0..",
                 kMaxWorld, ", got ", world_size);
  XSTAGE_REQUIRE(R > 0 && R <= kMaxRGBps * 1e9, "platform '", name, "': R must be in (0, ", kMaxRGBps,
                 "] GB/s, got ", R / 1e9, " GB/s");
  XSTAGE_REQUIRE(!tiss0_table.empty(), "platform '", name, "': tiss0_table is empty");
  XSTAGE_REQUIRE(!q_table.empty(), "platform '", name, "': q_table is empty");
  std::map<std::pair<int, double>, int> seen;
  for (size_t i = 0; i < tiss0_table.size(); ++i) {
    const auto& e = tiss0_table[i];
    XSTAGE_REQUIRE(e.K > 0 && e.K <= kMaxK, "platform '", name, "': tiss0_table[", i, "].K must be in 1..", kMaxK,
                   ", got ", e.K);
    XSTAGE_REQUIRE(e.V > 0 && e.V <= kMaxBytes, "platform '", name, "': tiss0_table[", i, "].V must be in (0, ",
                   kMaxBytes, "] bytes, got ", e.V);
    XSTAGE_REQUIRE(e.tiss0 > 0 && e.tiss0 * 1e6 <= kMaxTissUs, "platform '", name, "': tiss0_table[", i,
                   "].tiss0 must be in (0, ", kMaxTissUs, "] us, got ", e.tiss0 * 1e6, " us");
    XSTAGE_REQUIRE(seen.emplace(std::make_pair(e.K, e.V), 1).second, "platform '", name,
                   "': tiss0_table has two entries for K = ", e.K, ", V = ", e.V);
  }
  std::map<int, int> qk;
  for (size_t i = 0; i < q_table.size(); ++i) {
    XSTAGE_REQUIRE(q_table[i].K > 0 && q_table[i].K <= kMaxK, "platform '", name, "': q_table[", i,
                   "].K must be in 1..", kMaxK, ", got ", q_table[i].K);
    XSTAGE_REQUIRE(q_table[i].Q > 0 && q_table[i].Q <= kMaxBytes, "platform '", name, "': q_table[", i,
                   "].Q must be in (0, ", kMaxBytes, "] bytes, got ", q_table[i].Q);
    XSTAGE_REQUIRE(qk.emplace(q_table[i].K, 1).second, "platform '", name,
                   "': q_table has two entries for K = ", q_table[i].K);
  }
  for (const auto& [rate, what] : {std::pair{tc_bf16, "bf16"}, {tc_fp8, "fp8"}, {attn_bf16, "attention_bf16"}})
    XSTAGE_REQUIRE(rate >= 0 && rate <= kMaxTflops * 1e12, "platform '", name, "': tensor-core rate ", what,
                   " must be in [0, ", kMaxTflops, "] TFLOP/s, got ", rate / 1e12);
  XSTAGE_REQUIRE(hbm_read >= 0 && hbm_read <= kMaxTBps * 1e12, "platform '", name,
                 "': the HBM read rate must be in [0, ", kMaxTBps, "] TB/s, got ", hbm_read / 1e12);
}

// JSON uses readable units (GB/s, us, bytes, TFLOP/s); the struct holds SI.
nlohmann::json Platform::to_json() const {
  nlohmann::json j;
  j["name"] = name;
  j["provenance"] = {{"machine", provenance.machine}, {"date", provenance.date},
                     {"command", provenance.command}, {"source", provenance.source},
                     {"note", provenance.note}};
  j["sm_count"] = sm_count;
  j["world_size"] = world_size;
  j["R_GBps"] = R / 1e9;
  auto t = nlohmann::json::array();
  for (const auto& e : tiss0_table) t.push_back({{"K", e.K}, {"V_bytes", e.V}, {"tiss0_us", e.tiss0 * 1e6}});
  j["tiss0_table"] = t;
  auto q = nlohmann::json::array();
  for (const auto& e : q_table) q.push_back({{"K", e.K}, {"Q_bytes", e.Q}});
  j["q_table"] = q;
  nlohmann::json tc = nlohmann::json::object();
  if (tc_bf16 > 0) tc["bf16"] = tc_bf16 / 1e12;
  if (tc_fp8 > 0) tc["fp8"] = tc_fp8 / 1e12;
  if (attn_bf16 > 0) tc["attention_bf16"] = attn_bf16 / 1e12;
  if (!tc.empty()) j["tensor_core_tflops"] = tc;
  if (hbm_read > 0) j["memory_tbps"] = {{"hbm_read", hbm_read / 1e12}};
  return j;
}

Platform Platform::from_json(const nlohmann::json& j) {
  XSTAGE_REQUIRE(j.is_object(), "platform JSON: top level must be an object");
  only_keys(j, {"name", "provenance", "sm_count", "world_size", "R_GBps", "tiss0_table", "q_table", "tensor_core_tflops",
                "memory_tbps"}, "the top level");
  Platform p;
  p.name = str(j, "name");
  if (j.contains("provenance")) {
    const auto& pr = j.at("provenance");
    XSTAGE_REQUIRE(pr.is_object(), "platform JSON: 'provenance' must be an object");
    only_keys(pr, {"machine", "date", "command", "source", "note"}, "provenance");
    p.provenance = {str(pr, "machine"), str(pr, "date"), str(pr, "command"), str(pr, "source"),
                    str(pr, "note")};
  }
  p.sm_count = whole(j, "sm_count", "the top level", 1, kMaxSm);
  if (j.contains("world_size")) p.world_size = whole(j, "world_size", "the top level", 0, kMaxWorld);
  p.R = positive(j, "R_GBps", "the top level", kMaxRGBps, "GB/s") * 1e9;
  XSTAGE_REQUIRE(j.contains("tiss0_table") && j.at("tiss0_table").is_array(),
                 "platform JSON: 'tiss0_table' must be an array");
  int i = 0;
  for (const auto& e : j.at("tiss0_table")) {
    std::string where = "tiss0_table[" + std::to_string(i++) + "]";
    XSTAGE_REQUIRE(e.is_object(), "platform JSON: ", where, " must be an object");
    only_keys(e, {"K", "V_bytes", "tiss0_us"}, where);
    p.tiss0_table.push_back({whole(e, "K", where, 1, kMaxK), positive(e, "V_bytes", where, kMaxBytes, "bytes"),
                             positive(e, "tiss0_us", where, kMaxTissUs, "us") * 1e-6});
  }
  XSTAGE_REQUIRE(j.contains("q_table") && j.at("q_table").is_array(),
                 "platform JSON: 'q_table' must be an array");
  i = 0;
  for (const auto& e : j.at("q_table")) {
    std::string where = "q_table[" + std::to_string(i++) + "]";
    XSTAGE_REQUIRE(e.is_object(), "platform JSON: ", where, " must be an object");
    only_keys(e, {"K", "Q_bytes"}, where);
    p.q_table.push_back({whole(e, "K", where, 1, kMaxK), positive(e, "Q_bytes", where, kMaxBytes, "bytes")});
  }
  if (j.contains("tensor_core_tflops")) {
    const auto& tc = j.at("tensor_core_tflops");
    XSTAGE_REQUIRE(tc.is_object(), "platform JSON: 'tensor_core_tflops' must be an object");
    only_keys(tc, {"bf16", "fp8", "attention_bf16"}, "tensor_core_tflops");
    if (tc.contains("bf16")) p.tc_bf16 = positive(tc, "bf16", "tensor_core_tflops", kMaxTflops, "TFLOP/s") * 1e12;
    if (tc.contains("fp8")) p.tc_fp8 = positive(tc, "fp8", "tensor_core_tflops", kMaxTflops, "TFLOP/s") * 1e12;
    if (tc.contains("attention_bf16"))
      p.attn_bf16 = positive(tc, "attention_bf16", "tensor_core_tflops", kMaxTflops, "TFLOP/s") * 1e12;
  }
  if (j.contains("memory_tbps")) {
    const auto& m = j.at("memory_tbps");
    XSTAGE_REQUIRE(m.is_object(), "platform JSON: 'memory_tbps' must be an object");
    only_keys(m, {"hbm_read"}, "memory_tbps");
    if (m.contains("hbm_read")) p.hbm_read = positive(m, "hbm_read", "memory_tbps", kMaxTBps, "TB/s") * 1e12;
  }
  p.validate();
  return p;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> n;
  for (const auto& p : kPresets) n.emplace_back(p.name);
  return n;
}

Platform preset(const std::string& name) {
  for (const auto& p : kPresets)
    if (name == p.name) return Platform::from_json(nlohmann::json::parse(p.json));
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown platform '" + name + "' (presets: " + known +
                   "; or give a path to a platform JSON file)");
}

Platform Platform::load(const std::string& name_or_path) {
  for (const auto& p : kPresets)
    if (name_or_path == p.name) return preset(name_or_path);
  std::error_code ec;
  namespace fs = std::filesystem;
  if (!fs::exists(name_or_path, ec)) {
    XSTAGE_REQUIRE(name_or_path.find('/') == std::string::npos && name_or_path.find(".json") == std::string::npos,
                   "platform file '", name_or_path, "' does not exist");
    return preset(name_or_path);  // throws: unknown preset
  }
  XSTAGE_REQUIRE(fs::is_regular_file(name_or_path, ec), "platform file '", name_or_path, "' is ",
                 fs::is_directory(name_or_path, ec) ? "a folder" : "not a regular file", " (give a preset name "
                 "or a platform JSON file)");
  std::ifstream in(name_or_path);
  XSTAGE_REQUIRE(in, "cannot read platform file '", name_or_path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  // A key given twice in one object: nlohmann keeps the last silently; name it instead.
  std::vector<std::set<std::string>> open;  // the keys seen in each enclosing object
  std::string twice;
  auto dup = [&](int /*depth*/, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (ev == nlohmann::json::parse_event_t::object_start) open.emplace_back();
    if (ev == nlohmann::json::parse_event_t::object_end && !open.empty()) open.pop_back();
    if (ev == nlohmann::json::parse_event_t::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second &&
        twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  try {
    j = nlohmann::json::parse(ss.str(), dup);
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError("platform file '" + name_or_path + "' is not valid JSON: " + e.what());
  }
  XSTAGE_REQUIRE(twice.empty(), "platform file '", name_or_path, "': key '", twice, "' is given twice in one object");
  try {
    return from_json(j);
  } catch (const UsageError& e) {
    throw UsageError(name_or_path + ": " + e.what());
  }
}

void Platform::save(const std::string& path) const {
  validate();
  write_file_atomic(path, "platform file", [&](std::ostream& out) { out << to_json().dump(2) << "\n"; });
}

}  // namespace xstage::model
