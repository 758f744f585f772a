// Bad arguments, one row each: exit 2, nothing on stdout, one line "xstage: error: ..." naming the real
// problem (issue 9). And -o: symlinks are written through, non-regular files refused, no temp files left.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/cli_runner.hpp"

using cli_test::expect_usage;
using cli_test::xstage;
namespace fs = std::filesystem;

namespace {

const std::string kCsv = std::string(XSTAGE_SOURCE_DIR) + "/results/calibration/calibration.csv";
const std::string kMoe = "simulate moe --hidden 4096 --inter 1024 --experts 128 --topk 8 ";

// A scratch folder of this test process, removed at the end.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("xstage-cli-errors-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

std::string platform_json(const std::string& sm, const std::string& R) {
  return R"({"name": "t", "sm_count": )" + sm + R"(, "R_GBps": )" + R +
         R"(, "tiss0_table": [{"K": 132, "V_bytes": 1e6, "tiss0_us": 0.5}], "q_table": [{"K": 132, "Q_bytes": 2e6}]})";
}

struct Bad {
  std::string args, fragment;
};

}  // namespace

TEST(CliErrors, EveryBadArgumentIsOneLineAndExit2) {
  Scratch s;
  const std::string big_R = s.write("bigR.json", platform_json("132", "1e308"));
  const std::string big_sm = s.write("bigsm.json", platform_json("18446744073709551616", "300"));
  std::string typo = platform_json("132", "300"), twice = typo;
  typo.insert(1, R"("world_sise": 8, )");
  twice.insert(1, R"("sm_count": 4, )");
  const std::string typo_file = s.write("typo.json", typo), twice_file = s.write("twice.json", twice);
  const Bad table[] = {
      // eval
      {"eval -B 1e-300", "-B must be a whole number of bytes"},
      {"eval -B 1.5", "-B must be a whole number of bytes"},
      {"eval -B 1e30", "-B 1e30 is too large"},
      {"eval -B 18446744073709551616", "is too large"},
      {"eval -B 8K -G 1,,2", "--gap: empty item in '1,,2'"},
      {"eval -B 8K -G 1,", "--gap: empty item"},
      {"eval -B 8K -K 2147483648", "-K 2147483648 is too large (at most 2147483647)"},
      {"eval -B 8K -K 1.5", "-K must be a whole number"},
      {"eval -B 8K --platform /dev/null", "'/dev/null' is not a regular file"},
      {"eval -B 8K --platform /no/such.json", "'/no/such.json' does not exist"},
      {"eval -B 8K --platform " + s.dir.string(), "is a folder"},
      {"eval -B 8K --platform " + big_R, "R_GBps' in the top level must be in (0, 1e+06] GB/s, got 1e+308"},
      {"eval -B 8K --platform " + big_sm, "sm_count' in the top level must be a whole number in 1..1e+06, got 1.8446744073709552e+19"},
      // simulate moe
      {kMoe + "-K 0", "-K must be positive, got 0"},
      {kMoe + "-P 0", "-P must be >= 1, got 0"},
      {kMoe + "--tflops 0", "--tflops must be a positive, finite rate"},
      {kMoe + "--tflops inf", "--tflops must be a positive, finite rate"},
      {kMoe + "--tflops nan", "--tflops must be a positive, finite rate"},
      {kMoe + "--experts-per-wave 0", "--experts-per-wave must be positive, got 0"},
      {kMoe + "--routing skewed --seed -1", "--seed must be a whole number in 0..18446744073709551615, got '-1'"},
      {kMoe + "--routing skewed --seed 18446744073709551616", "--seed 18446744073709551616 is too large"},
      {kMoe + "--tokens 16000000", "--tokens 16000000: the simulation would need about"},
      {kMoe + "--tokens 10000000", "more than the"},
      {kMoe + "--tokens 1000000 --json --tiles", "every one printed as JSON"},
      {kMoe + "--tokens 2147483648", "--tokens 2147483648 is too large"},
      // design
      {"design moe --hidden 4096 --inter 1024 --experts 128 --topk 8 --tflops inf", "--tflops must be a positive, finite rate"},
      {"design moe --hidden 4096 --inter 1024 --experts 128 --topk 8 --tflops 0", "--tflops must be a positive, finite rate"},
      {"design attention --tflops inf", "--tflops must be a positive, finite rate"},
      {"design attention --sigma 1e-30", "--sigma must be at least 1 ns per KV tile"},
      {"design attention --seq 8K,,16K", "--seq: empty item in '8K,,16K'"},
      {"design paper --platform paper-b200", "give one with --tflops"},
      {"design paper --tflops -1", "--tflops must be a positive, finite rate"},
      {"design paper --attn-tflops inf", "--attn-tflops must be a positive, finite rate"},
      {"design nosuch", "unknown command 'nosuch' for xstage ... design"},
      // platform files: a misspelt key, a key given twice (nlohmann would keep the last silently)
      {"platform show " + typo_file, "unknown key 'world_sise' in the top level"},
      {"platform show " + twice_file, "key 'sm_count' is given twice in one object"},
      // fit
      {"fit " + kCsv + " -o \"\"", "--out: empty value"},
      {"design attention --head-dim \"\"", "--head-dim: empty value"},  // (CLI11 would read 0)
      {"fit " + kCsv + " -o /dev/full", "'/dev/full': it exists and is not a regular file"},
      {"fit " + kCsv + " -o /dev/null", "'/dev/null': it exists and is not a regular file"},
      {"fit " + kCsv + " -o " + s.dir.string(), "it is a folder"},
      {"fit " + kCsv + " -o /no/such/dir/p.json", "folder '/no/such/dir' does not exist"},
      {"fit " + kCsv + " --sm-count 10", "SM count 10 is below the largest K = 132"},
      {"fit " + kCsv + " -o " + kCsv, "is the input CSV"},  // (the committed measurements stay as they are)
      // what fit would write must be a file the loader takes back
      {"fit " + kCsv + " --sm-count 2000000 -o " + (s.dir / "big.json").string(), "sm_count must be in 1..1e+06, got 2000000"},
      {"fit " + kCsv + " --world-size 2000000", "world_size must be in 0..1e+06, got 2000000"},
      {"fit " + kCsv + " --name \"$(printf 'bad\\377')\"", "the name is not UTF-8 (byte 3"},
      {"fit /etc", "'/etc' is a directory, not a CSV file"},
      {"fit /no/such.csv", "'/no/such.csv' does not exist"},
      // commands
      {"nosuchcmd", "unknown command 'nosuchcmd' for xstage (commands: platform, eval"},
      {"platform nosuch", "unknown command 'nosuch' for xstage ... platform"},
      // calibrate
      {"calibrate --refit /no/such/run", "--refit /no/such/run: no such folder"},
      {"calibrate --refit " + s.dir.string(), "no summary.json there"},
      {"calibrate --refit " + std::string(XSTAGE_SOURCE_DIR) + "/results/calibration -o \"\"", "--out: empty value"},
      {"calibrate --refit " + std::string(XSTAGE_SOURCE_DIR) + "/results/calibration --list", "excludes"},
#if XSTAGE_WITH_CUDA
      {"calibrate --only nosuch --list", "--only 'nosuch' matches no test case"},
      {"calibrate --timeout 2e9", "--timeout: timeout must be a positive number of seconds up to 1e+09, got 2e+09 s"},
      {"calibrate --timeout 0", "--timeout: timeout must be a positive number of seconds up to 1e+09, got 0 s"},
#else
      {"calibrate --only nosuch --list", "built without CUDA"},
#endif
  };
  for (const Bad& b : table) expect_usage(b.args, b.fragment);
  EXPECT_FALSE(fs::exists(s.dir / "big.json"));
}

// A refit with a bad value in the run's files names it (file, column or key, value) and writes nothing: no output
// folder, no copied CSV; a refused target leaves the other files unwritten too.
TEST(CliErrors, RefitOfBadRunNamesTheValueAndWritesNothing) {
  Scratch s;
  const fs::path run = fs::path(XSTAGE_SOURCE_DIR) / "results" / "calibration";
  auto bad_run = [&](const std::string& name, const std::string& csv, const nlohmann::json& summary) {
    fs::create_directories(s.dir / name);
    std::ofstream(s.dir / name / "calibration.csv") << csv;
    std::ofstream(s.dir / name / "summary.json") << summary.dump();
    return (s.dir / name).string();
  };
  std::ifstream in(run / "calibration.csv");
  std::string header, first, rest;
  std::getline(in, header);
  std::getline(in, first);
  rest.assign(std::istreambuf_iterator<char>(in), {});
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
  // K (the third column of the committed CSV) as text
  ASSERT_EQ(header.rfind("mode,target,K,", 0), 0u) << header;
  const size_t c1 = first.find(','), c2 = first.find(',', c1 + 1), c3 = first.find(',', c2 + 1);
  const std::string bad_k = first.substr(0, c2 + 1) + "abc" + first.substr(c3);
  const std::string csv = header + "\n" + first + "\n" + rest;
  nlohmann::json s_str = summary, s_big = summary, s_zero = summary;
  s_str["world_size"] = "2";
  s_big["sm_count"] = 100000000000LL;
  s_zero["sm_count"] = 0;
  const struct {
    std::string dir, fragment;
  } cases[] = {
      {bad_run("k", header + "\n" + bad_k + "\n" + rest, summary), "calibration.csv:2: column 'K': 'abc' is not a whole number"},
      {bad_run("ws", csv, s_str), "summary.json: 'world_size' must be a whole number in 1..1000000, got \"2\""},
      {bad_run("big", csv, s_big), "'sm_count' must be a whole number in 1..1000000, got 100000000000"},
      {bad_run("zero", csv, s_zero), "'sm_count' must be a whole number in 1..1000000, got 0"},
  };
  for (const auto& c : cases) {
    const fs::path out = s.dir / ("out-" + fs::path(c.dir).filename().string());
    expect_usage("calibrate --refit '" + c.dir + "' -o '" + out.string() + "' --no-plots", c.fragment);
    EXPECT_FALSE(fs::exists(out)) << out;
  }
  // summary.json a folder in the output: refused before calibration.csv, platform.json, fit.json are written
  fs::create_directories(s.dir / "o" / "summary.json");
  expect_usage("calibrate --refit '" + run.string() + "' -o '" + (s.dir / "o").string() + "' --no-plots",
               "cannot write summary file");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(s.dir / "o")) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"summary.json"});
}

TEST(CliErrors, OutputThroughASymlinkWritesTheTarget) {
  Scratch s;
  const fs::path target = s.dir / "target.json", link = s.dir / "L";
  std::ofstream(target) << "old\n";
  fs::create_symlink(target, link);
  const auto r = xstage("fit '" + kCsv + "' -o '" + link.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));  // still a link
  const auto j = nlohmann::json::parse(std::ifstream(target));
  const auto committed = nlohmann::json::parse(std::ifstream(fs::path(kCsv).parent_path() / "summary.json"));
  EXPECT_NEAR(j["R_GBps"].get<double>(), committed["R_GBps"].get<double>(), 1e-6 * committed["R_GBps"].get<double>())
      << "the fit written through the link is not the committed run's";
  // A dangling link: its target is created.
  const fs::path target2 = s.dir / "new.json", link2 = s.dir / "L2";
  fs::create_symlink(target2, link2);
  ASSERT_EQ(xstage("fit '" + kCsv + "' -o '" + link2.string() + "'").code, 0);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link2)));
  EXPECT_TRUE(fs::is_regular_file(target2));
  // No temp file anywhere, also after a refused write.
  expect_usage("fit '" + kCsv + "' -o '" + (s.dir / "no" / "p.json").string() + "'", "does not exist");
  for (const auto& e : fs::directory_iterator(s.dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(CliErrors, RefitWritesOnlyIntoOut) {
  Scratch s;
  const std::string run = std::string(XSTAGE_SOURCE_DIR) + "/results/calibration";
  const auto before = fs::last_write_time(run + "/summary.json");
  const auto r = xstage("calibrate --refit '" + run + "' --no-plots");  // no -o: prints, writes nothing
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("nothing written (no -o)"), std::string::npos);
  EXPECT_EQ(fs::last_write_time(run + "/summary.json"), before);
  const fs::path out = s.dir / "out";
  const auto w = xstage("calibrate --refit '" + run + "' -o '" + out.string() + "' --no-plots");
  ASSERT_EQ(w.code, 0) << w.err;
  const auto j = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  for (const char* k : {"model_period_oos_median_err", "model_period_oos_max_err", "model_tiss_oos_median_err",
                        "model_tiss_oos_max_err", "oos_points"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_TRUE(j["variants"][3]["gap_median_err"].is_null());  // warp producers: no gap sweep, not "0 %"
  EXPECT_NE(w.out.find("st/p2p/warp"), std::string::npos);
  EXPECT_NE(w.out.find("n/a"), std::string::npos);
  // The committed summary is this refit's output (recomputed from the committed CSV).
  const auto committed = nlohmann::json::parse(std::ifstream(run + "/summary.json"));
  EXPECT_EQ(committed["oos_points"], j["oos_points"]);
  EXPECT_GT(j["oos_points"].get<int>(), 0);
  for (const char* k : {"model_period_oos_median_err", "model_period_oos_max_err", "model_tiss_oos_median_err",
                        "model_tiss_oos_max_err"})
    EXPECT_NEAR(committed[k].get<double>(), j[k].get<double>(), 1e-12) << k;
}
