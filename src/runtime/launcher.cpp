// Local launcher: fork/exec one process per rank, wait for all, stop the rest when one fails.
#include "xstage/runtime/launcher.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "xstage/common/error.hpp"

namespace xstage::runtime {

int launch_local(const LaunchOptions& opt, const std::string& id_hex) {
  XSTAGE_REQUIRE(opt.nproc >= 1, "launch: -n must be >= 1, got ", opt.nproc);
  XSTAGE_REQUIRE(!opt.argv.empty(), "launch: no command given (use: xstage launch -n N -- cmd args...)");
  std::vector<pid_t> pids;
  for (int r = 0; r < opt.nproc; ++r) {
    pid_t pid = fork();
    XSTAGE_CHECK(pid >= 0, "launch: fork failed for rank ", r, ": ", std::strerror(errno));
    if (pid == 0) {
      setpgid(0, 0);  // own process group: stopping a rank also stops what it started
      setenv("XSTAGE_RANK", std::to_string(r).c_str(), 1);
      setenv("XSTAGE_WORLD_SIZE", std::to_string(opt.nproc).c_str(), 1);
      setenv("XSTAGE_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("XSTAGE_NCCL_ID", id_hex.c_str(), 1);
      for (const auto& [k, v] : opt.extra_env) setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> args;
      for (const auto& a : opt.argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      std::fprintf(stderr, "xstage launch: rank %d: cannot execute '%s': %s\n", r, args[0], std::strerror(errno));
      _exit(127);
    }
    setpgid(pid, pid);  // also here: no race with the child's own call
    pids.push_back(pid);
  }
  int first_bad = 0;
  int alive = opt.nproc;
  auto t0 = std::chrono::steady_clock::now();
  auto stop_others = [&] {
    for (pid_t p : pids)
      if (p > 0) kill(-p, SIGTERM);
  };
  while (alive > 0) {
    int status = 0;
    pid_t done = waitpid(-1, &status, WNOHANG);
    if (done == 0) {
      if (opt.timeout_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > opt.timeout_s) {
        std::fprintf(stderr, "xstage launch: timeout after %.0f s, stopping %d remaining rank(s)\n",
                     opt.timeout_s, alive);
        stop_others();
        if (!first_bad) first_bad = 124;
        // Wait for the stopped ranks without the timeout.
        while (alive > 0 && waitpid(-1, &status, 0) > 0) --alive;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (done < 0) break;
    --alive;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    for (size_t r = 0; r < pids.size(); ++r)
      if (pids[r] == done) {
        pids[r] = -1;
        if (code != 0 && !first_bad) {
          std::fprintf(stderr, "xstage launch: rank %zu exited with status %d; stopping the others\n", r, code);
          first_bad = code;
          stop_others();
        }
      }
  }
  return first_bad;
}

}  // namespace xstage::runtime
