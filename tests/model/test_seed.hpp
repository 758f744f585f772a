#pragma once
// The seed of the randomised tests: fixed (20261129) so that a run is reproducible, overridable with
// XSTAGE_TEST_SEED=N to explore; printed by every test that uses it (SCOPED_TRACE / stdout).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

inline std::uint64_t test_seed() {
  const char* env = std::getenv("XSTAGE_TEST_SEED");
  const std::uint64_t seed = env && *env ? std::strtoull(env, nullptr, 10) : 20261129ULL;
  std::printf("[ seed     ] %llu (XSTAGE_TEST_SEED overrides)\n", static_cast<unsigned long long>(seed));
  return seed;
}
