// Platform M_X: presets, interpolation, JSON round trip, errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include "test_seed.hpp"

#include "xstage/common/error.hpp"
#include "xstage/model/platform.hpp"

using namespace xstage::model;

namespace {
Platform two_row_platform() {
  Platform p;
  p.name = "t";
  p.sm_count = 100;
  p.R = 400e9;
  p.tiss0_table = {{50, 1e6, 0.2e-6}, {50, 2e6, 0.4e-6}, {100, 1e6, 0.3e-6}, {100, 3e6, 0.9e-6}};
  p.q_table = {{50, 1e6}, {100, 3e6}};
  return p;
}
std::string tmp_path(const char* stem) {
  static int n = 0;
  return (std::filesystem::temp_directory_path() /
          (std::string(stem) + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".json")).string();
}
}  // namespace

TEST(Platform, PresetsMatchTheirSources) {
  auto names = preset_names();
  ASSERT_EQ(names.size(), 2u);
  // The embedded preset is exactly its JSON file (our calibration, results/calibration/), and its
  // numbers are in the range every measurement on these machines gave.
  auto h = preset("h200-nvlink4");
  const auto file = Platform::load(std::string(XSTAGE_SOURCE_DIR) + "/platforms/h200-nvlink4.json");
  EXPECT_EQ(h.to_json(), file.to_json());
  EXPECT_EQ(h.sm_count, 132);
  EXPECT_EQ(h.world_size, 2);
  EXPECT_EQ(h.provenance.source, "calibration");
  EXPECT_GT(h.R, 330e9);
  EXPECT_LT(h.R, 478e9);  // NV18 line rate
  EXPECT_GT(h.Q(132), 1e6);
  EXPECT_LT(h.Q(132), 4e6);
  EXPECT_GT(h.Q(132), h.Q(66));
  EXPECT_NEAR(h.tc_fp8, 1228e12, 1e9);
  EXPECT_NEAR(h.hbm_read, 4.28e12, 1e9);  // s62's ByteStream on 4 GiB
  // The probe fixture keeps PLATFORM.md's values (the tests of hand-computed numbers use it).
  auto pr = Platform::load(std::string(XSTAGE_SOURCE_DIR) + "/tests/data/h200-probe-platform.json");
  EXPECT_NEAR(pr.R, 370e9, 1e6);
  EXPECT_NEAR(pr.tiss0(132, 132 * 32768.0), 0.615e-6, 1e-9);
  EXPECT_NEAR(pr.Q(132), 2.5e6, 1);
  EXPECT_NEAR(pr.Q(66), 1.5e6, 1);
  EXPECT_EQ(pr.provenance.source, "probe");
  auto b = preset("paper-b200");
  EXPECT_EQ(b.sm_count, 148);
  EXPECT_EQ(b.world_size, 8);
  EXPECT_NEAR(b.R, 717e9, 1e6);
  EXPECT_NEAR(b.Q(148), 4.25 * 1024 * 1024, 1);
  EXPECT_NEAR(b.tiss0(148, 148 * 32768.0), 0.76e-6, 1e-12);
}

TEST(Platform, InterpolatesInVThenK) {
  auto p = two_row_platform();
  EXPECT_NEAR(p.tiss0(50, 1.5e6), 0.3e-6, 1e-15);          // midpoint in V
  EXPECT_NEAR(p.tiss0(100, 2e6), 0.6e-6, 1e-15);
  EXPECT_NEAR(p.tiss0(75, 1e6), 0.25e-6, 1e-15);           // midpoint in K
  EXPECT_NEAR(p.tiss0(50, 0.1e6), 0.2e-6, 1e-15);          // floor below the smallest V
  EXPECT_NEAR(p.tiss0(50, 4e6), 0.8e-6, 1e-15);            // proportional above the largest V
  EXPECT_NEAR(p.tiss0(10, 1e6), 0.2e-6, 1e-15);            // clamped in K
  EXPECT_NEAR(p.tiss0(1000, 3e6), 0.9e-6, 1e-15);
  EXPECT_NEAR(p.Q(75), 2e6, 1e-6);
  EXPECT_NEAR(p.Q(10), 1e6, 1e-6);
  EXPECT_NEAR(p.Q(500), 3e6, 1e-6);
  // Monotone in V over random points.
  std::mt19937_64 rng(test_seed());
  std::uniform_real_distribution<double> u(1e4, 1e7);
  for (int i = 0; i < 200; ++i) {
    double a = u(rng), b = u(rng);
    if (a > b) std::swap(a, b);
    EXPECT_LE(p.tiss0(70, a), p.tiss0(70, b) + 1e-18);
  }
}

TEST(Platform, RejectsBadQueries) {
  auto p = two_row_platform();
  EXPECT_THROW(p.tiss0(0, 1e6), xstage::UsageError);
  EXPECT_THROW(p.tiss0(10, -1), xstage::UsageError);
  EXPECT_THROW(p.Q(-3), xstage::UsageError);
}

TEST(Platform, JsonRoundTripAndSaveLoad) {
  auto p = two_row_platform();
  p.provenance = {"m", "2026-11-29", "cmd", "calibration", "n"};
  p.tc_bf16 = 700e12;
  p.hbm_read = 4.1e12;
  auto q = Platform::from_json(p.to_json());
  EXPECT_DOUBLE_EQ(q.hbm_read, 4.1e12);
  EXPECT_EQ(Platform::from_json(two_row_platform().to_json()).hbm_read, 0);  // optional: absent is unknown
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.provenance.command, "cmd");
  EXPECT_DOUBLE_EQ(q.R, p.R);
  EXPECT_DOUBLE_EQ(q.tc_bf16, p.tc_bf16);
  ASSERT_EQ(q.tiss0_table.size(), p.tiss0_table.size());
  EXPECT_NEAR(q.tiss0(75, 1.3e6), p.tiss0(75, 1.3e6), 1e-18);
  auto path = tmp_path("xstage_platform_");
  p.save(path);
  auto r = Platform::load(path);
  EXPECT_NEAR(r.Q(80), p.Q(80), 1e-6);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

TEST(Platform, ErrorsNameTheProblem) {
  try {
    Platform::load("no-such-platform");
    FAIL() << "expected UsageError";
  } catch (const xstage::UsageError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("no-such-platform"), std::string::npos);
    EXPECT_NE(m.find("h200-nvlink4"), std::string::npos);
  }
  auto j = two_row_platform().to_json();
  j["R_GBps"] = -1;
  try {
    Platform::from_json(j);
    FAIL();
  } catch (const xstage::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'R_GBps' in the top level must be in (0, 1e+06] GB/s, got -1"), std::string::npos)
        << e.what();
  }
  j = two_row_platform().to_json();
  j["memory_tbps"] = {{"hbm_read", 0}};
  try {
    Platform::from_json(j);
    FAIL();
  } catch (const xstage::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'hbm_read' in memory_tbps must be in (0, 1000] TB/s, got 0"), std::string::npos)
        << e.what();
  }
  j["memory_tbps"] = 4.2;
  EXPECT_THROW(Platform::from_json(j), xstage::UsageError);
  j = two_row_platform().to_json();
  j["tiss0_table"][1].erase("V_bytes");
  try {
    Platform::from_json(j);
    FAIL();
  } catch (const xstage::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tiss0_table[1]"), std::string::npos);
  }
  auto path = tmp_path("xstage_badjson_");
  std::ofstream(path) << "{ not json";
  EXPECT_THROW(Platform::load(path), xstage::UsageError);
  std::filesystem::remove(path);
}
