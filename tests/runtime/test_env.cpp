// Launch-environment parsing (xstage, torchrun, mpirun, Slurm), id hex, and the local launcher.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>

#include "xstage/common/error.hpp"
#include "xstage/runtime/comm.hpp"
#include "xstage/runtime/env.hpp"
#include "xstage/runtime/launcher.hpp"
#include "xstage/runtime/team.hpp"

using namespace xstage::runtime;
using xstage::UsageError;

TEST(Env, NoLauncher) {
  auto i = detect_launch(map_env({}));
  EXPECT_EQ(i.launcher, "none");
  EXPECT_EQ(i.world_size, 1);
}

TEST(Env, XstageLauncherPassesId) {
  auto i = detect_launch(map_env({{"XSTAGE_RANK", "1"}, {"XSTAGE_WORLD_SIZE", "2"}, {"XSTAGE_LOCAL_RANK", "1"},
                                  {"XSTAGE_NCCL_ID", "ab"}}));
  EXPECT_EQ(i.launcher, "xstage");
  EXPECT_EQ(i.rank, 1);
  EXPECT_EQ(i.world_size, 2);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.id_hex, "ab");
  EXPECT_TRUE(i.id_file.empty());
}

TEST(Env, Torchrun) {
  auto i = detect_launch(map_env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "3"},
                                  {"TORCHELASTIC_RUN_ID", "job7"}, {"XSTAGE_ID_DIR", "/shared"}}));
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.world_size, 8);
  EXPECT_EQ(i.id_file, "/shared/xstage-ncclid-job7");
}

TEST(Env, TorchrunFallsBackToMasterAddress) {
  auto i = detect_launch(map_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"},
                                  {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(i.local_rank, 0);  // no LOCAL_RANK: the global rank picks the GPU
  EXPECT_EQ(i.id_file, "/tmp/xstage-ncclid-10.0.0.1_29500");
}

TEST(Env, Mpirun) {
  auto i = detect_launch(map_env({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "6"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"PMIX_NAMESPACE", "prterun-x@1"}}));
  EXPECT_EQ(i.launcher, "mpirun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.local_rank, 1);
  EXPECT_EQ(i.id_file, "/tmp/xstage-ncclid-prterun-x_1");
}

TEST(Env, Slurm) {
  auto i = detect_launch(map_env({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"},
                                  {"SLURM_JOB_ID", "991"}, {"SLURM_STEP_ID", "3"}, {"XSTAGE_ID_TIMEOUT_S", "5"}}));
  EXPECT_EQ(i.launcher, "slurm");
  EXPECT_EQ(i.world_size, 4);
  EXPECT_EQ(i.local_rank, 0);
  EXPECT_EQ(i.id_file, "/tmp/xstage-ncclid-991_3");
  EXPECT_DOUBLE_EQ(i.id_timeout_s, 5);
}

TEST(Env, XstageTakesPrecedenceOverTorchrun) {
  auto i = detect_launch(map_env({{"XSTAGE_RANK", "0"}, {"XSTAGE_WORLD_SIZE", "2"}, {"XSTAGE_NCCL_ID", "00"},
                                  {"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(i.launcher, "xstage");
  EXPECT_EQ(i.rank, 0);
}

static std::string usage_message(const std::map<std::string, std::string>& m) {
  try {
    detect_launch(map_env(m));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Env, Errors) {
  EXPECT_NE(usage_message({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "j"}}).find("RANK = 2 is outside [0, WORLD_SIZE = 2)"),
            std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "x1"}, {"WORLD_SIZE", "2"}}).find("RANK must be an integer, got 'x1'"), std::string::npos);
  EXPECT_NE(usage_message({{"SLURM_PROCID", "0"}}).find("SLURM_NTASKS is not set"), std::string::npos);
  EXPECT_NE(usage_message({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("XSTAGE_JOB_ID"), std::string::npos);
  EXPECT_NE(usage_message({{"XSTAGE_RANK", "0"}, {"XSTAGE_WORLD_SIZE", "0"}, {"XSTAGE_NCCL_ID", "0"}}).find("must be >= 1"),
            std::string::npos);
  EXPECT_NE(usage_message({{"XSTAGE_RANK", "0"}, {"XSTAGE_WORLD_SIZE", "2"}, {"XSTAGE_NCCL_ID", "0"},
                           {"XSTAGE_ID_TIMEOUT_S", "-1"}}).find("XSTAGE_ID_TIMEOUT_S"),
            std::string::npos);
}

TEST(Env, HexRoundTrip) {
  unsigned char in[kUniqueIdBytes], out[kUniqueIdBytes];
  for (size_t i = 0; i < kUniqueIdBytes; ++i) in[i] = static_cast<unsigned char>(i * 37 + 1);
  std::string h = to_hex(in, kUniqueIdBytes);
  ASSERT_EQ(h.size(), 2 * kUniqueIdBytes);
  from_hex(h, out, kUniqueIdBytes, "id");
  EXPECT_EQ(0, memcmp(in, out, kUniqueIdBytes));
  EXPECT_THROW(from_hex("abc", out, kUniqueIdBytes, "id"), UsageError);
  std::string bad = h;
  bad[7] = 'g';
  EXPECT_THROW(from_hex(bad, out, kUniqueIdBytes, "id"), UsageError);
}

TEST(Launcher, PassesRankEnvironment) {
  LaunchOptions o;
  o.nproc = 3;
  o.argv = {"sh", "-c", "test \"$XSTAGE_WORLD_SIZE\" = 3 && test \"$XSTAGE_NCCL_ID\" = cafe && "
                        "test \"$XSTAGE_RANK\" = \"$XSTAGE_LOCAL_RANK\" && test \"$EXTRA\" = 1"};
  o.extra_env = {{"EXTRA", "1"}};
  EXPECT_EQ(launch_local(o, "cafe"), 0);
}

TEST(Launcher, ReportsTheFailingRank) {
  LaunchOptions o;
  o.nproc = 2;
  o.argv = {"sh", "-c", "if [ \"$XSTAGE_RANK\" = 1 ]; then exit 7; fi; sleep 30"};
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(launch_local(o, "00"), 7);
  // rank 0 is stopped, not waited for 30 s
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0);
}

TEST(Launcher, TimeoutStopsEveryRank) {
  LaunchOptions o;
  o.nproc = 2;
  o.argv = {"sleep", "30"};
  o.timeout_s = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(launch_local(o, "00"), 124);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0);  // not the 30 s
}

TEST(Communicator, TimeoutMustBePositive) {  // checked before any device or NCCL call
  LaunchInfo li;
  li.rank = 0;
  li.world_size = 1;
  for (double t : {0.0, -1.0, std::nan(""), HUGE_VAL, 1e300, 2e9}) {
    CommOptions o;
    o.timeout_s = t;
    try {
      Communicator c(li, o);
      ADD_FAILURE() << "timeout " << t << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("timeout must be a positive number of seconds"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Team, EmulatedTimeoutMustBePositiveAndFinite) {  // checked before any device call: no GPU needed
  for (double t : {0.0, -1.0, std::nan(""), HUGE_VAL, 1e300, 2e9}) {
    try {
      Team::emulated(2, 0, t);
      ADD_FAILURE() << "timeout " << t << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("timeout must be a positive number of seconds up to 1e+09"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Launcher, ArgumentErrors) {
  LaunchOptions o;
  o.nproc = 0;
  o.argv = {"true"};
  EXPECT_THROW(launch_local(o, ""), UsageError);
  o.nproc = 1;
  o.argv.clear();
  EXPECT_THROW(launch_local(o, ""), UsageError);
  o.argv = {"/nonexistent/xstage-no-such-program"};
  EXPECT_EQ(launch_local(o, ""), 127);
}
