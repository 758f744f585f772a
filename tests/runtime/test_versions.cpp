// The versions a result file records (xstage/runtime/versions.hpp, xstage/common/version.hpp): the encodings'
// text forms, and what this machine's build and libraries report (no GPU needed for any of it).
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <regex>
#include <string>

#include "xstage/common/version.hpp"
#include "xstage/runtime/versions.hpp"

using namespace xstage::runtime;

TEST(Versions, CudaText) {
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(12090), "12.9");
  EXPECT_EQ(cuda_version_text(12020), "12.2");
  EXPECT_EQ(cuda_version_text(0), "none");
  EXPECT_EQ(cuda_version_text(-1), "none");
}

TEST(Versions, NcclText) {
  EXPECT_EQ(nccl_version_text(22803), "2.28.3");
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(21805), "2.18.5");
  EXPECT_EQ(nccl_version_text(2708), "2.7.8");  // the encoding before 2.9
  EXPECT_EQ(nccl_version_text(0), "none");
}

TEST(Versions, ThisBuild) {
  EXPECT_TRUE(std::regex_match(std::string(xstage::version()), std::regex(R"(\d+\.\d+\.\d+)"))) << xstage::version();
  EXPECT_TRUE(std::regex_match(std::string(xstage::git_revision()), std::regex(R"([0-9a-f]{12}(\+dirty)?|unknown)")))
      << xstage::git_revision();
  EXPECT_EQ(xstage::version_line(),
            std::string("xstage ") + xstage::version() + " (git " + xstage::git_revision() + ")");
  const SoftwareVersions s = software_versions();
  EXPECT_EQ(s.cuda_build, CUDART_VERSION);
  EXPECT_EQ(s.nccl_build, NCCL_VERSION_CODE);
  // The runtime and libnccl answer without a GPU; the driver only where one is installed (0 otherwise).
  EXPECT_GT(s.cuda_runtime, 0);
  EXPECT_GT(s.nccl_runtime, 0);
  EXPECT_GE(s.cuda_driver, 0);
  const nlohmann::json j = to_json(s);
  for (const char* k : {"xstage", "git", "cuda_build", "cuda_runtime", "cuda_driver", "nccl_build", "nccl_runtime"})
    EXPECT_TRUE(j.contains(k) && j.at(k).is_string()) << k;
  EXPECT_EQ(j.at("cuda_build"), cuda_version_text(CUDART_VERSION));
  EXPECT_NE(to_text(s).find("built with CUDA " + cuda_version_text(CUDART_VERSION)), std::string::npos) << to_text(s);
}
