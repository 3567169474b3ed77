// The ssh fan-out's machinery on real local processes (sh): bounded parallelism, a deadline per
// child that kills its whole process group, output caps, and the order of results.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "gpuctl/util/fanout.hpp"

using namespace gpuctl;
using namespace std::chrono_literals;

namespace {
util::ProcessOptions sh(const std::string& script, std::chrono::milliseconds timeout = 10s) {
  util::ProcessOptions p;
  p.argv = {"/bin/sh", "-c", script};
  p.capture_stderr = true;
  p.timeout = timeout;
  return p;
}
}  // namespace

TEST_CASE("fanout: results in job order with exit codes, stdout and stderr apart", "[fanout]") {
  std::vector<util::ProcessOptions> jobs = {sh("echo one; echo err1 >&2; exit 3"), sh("sleep 0.2; echo two"),
                                            sh("printf three")};
  auto results = util::run_fanout(jobs, {});
  REQUIRE(results);
  REQUIRE(results->size() == 3);
  CHECK((*results)[0].process.exit_code == 3);
  CHECK((*results)[0].process.stdout_text == "one\n");
  CHECK((*results)[0].process.stderr_text == "err1\n");
  CHECK((*results)[1].process.stdout_text == "two\n");
  CHECK((*results)[2].process.stdout_text == "three");
  CHECK_FALSE((*results)[1].process.timed_out);
}

TEST_CASE("fanout: hung children are killed at their deadline, with everything they started", "[fanout]") {
  // Each hung job starts a grandchild that would keep the pipe open forever: killing only the
  // child would leave the loop waiting for EOF.
  std::vector<util::ProcessOptions> jobs;
  for (int i = 0; i < 6; i++) jobs.push_back(sh("sleep 30 & sleep 30; echo never", 700ms));
  jobs.push_back(sh("echo fine"));
  auto start = std::chrono::steady_clock::now();
  auto results = util::run_fanout(jobs, {});
  auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(results);
  for (int i = 0; i < 6; i++) {
    CHECK((*results)[i].process.timed_out);
    CHECK((*results)[i].process.stdout_text.empty());
  }
  CHECK((*results)[6].process.exit_code == 0);
  CHECK((*results)[6].process.stdout_text == "fine\n");
  // In parallel, all six deadlines run at once: far less than six deadlines in a row.
  CHECK(elapsed < 6 * 700ms);
}

TEST_CASE("fanout: never more children at once than max_parallel", "[fanout]") {
  // Each job appends to a shared file when it starts and removes its line when done; the most
  // lines ever seen is the concurrency.
  char dir_template[] = "/tmp/gpuctl-fanout-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string dir = dir_template;
  std::vector<util::ProcessOptions> jobs;
  for (int i = 0; i < 8; i++) {
    jobs.push_back(sh("touch " + dir + "/" + std::to_string(i) + "; ls " + dir + " | wc -l; sleep 0.2; rm " + dir +
                      "/" + std::to_string(i)));
  }
  util::FanoutOptions options;
  options.max_parallel = 3;
  std::size_t finished = 0;
  options.on_finish = [&](std::size_t) { finished++; };
  auto results = util::run_fanout(jobs, options);
  REQUIRE(results);
  int most = 0;
  for (const auto& r : *results) most = std::max(most, std::stoi(r.process.stdout_text));
  CHECK(most <= 3);
  CHECK(most >= 2);  // they did overlap
  CHECK(finished == 8);
  rmdir(dir.c_str());
}

TEST_CASE("fanout: a runaway child is cut at the output cap and killed", "[fanout]") {
  util::FanoutOptions options;
  options.output_cap = 1000;
  auto results = util::run_fanout({sh("yes garbage-line"), sh("echo small")}, options);
  REQUIRE(results);
  CHECK((*results)[0].truncated);
  CHECK((*results)[0].process.stdout_text.size() == 1000);
  CHECK((*results)[0].process.term_signal == SIGKILL);
  CHECK_FALSE((*results)[1].truncated);
}

TEST_CASE("fanout: a program that cannot start is a result, not an error", "[fanout]") {
  util::ProcessOptions missing;
  missing.argv = {"/nonexistent/ssh"};
  auto results = util::run_fanout({missing}, {});
  REQUIRE(results);
  CHECK((*results)[0].process.start_error == ENOENT);
}

TEST_CASE("fanout: a large batch is spawned from several threads, each child with its own pipes and job", "[fanout]") {
  // 100 jobs at once are spawned by helper threads (16 per thread). Every output must come back
  // to its own job, and no child may hold another's pipe (one without close-on-exec, created
  // while another thread spawns, would leak into that child): each child names its index and
  // the target of every descriptor it has open, its own stdout first.
  constexpr int kJobs = 100;
  std::vector<util::ProcessOptions> jobs;
  for (int i = 0; i < kJobs; i++) {
    jobs.push_back(
        sh("echo " + std::to_string(i) + "; readlink /proc/$$/fd/1; for f in /proc/$$/fd/*; do readlink $f; done"));
  }
  util::FanoutOptions options;
  options.max_parallel = kJobs;
  auto results = util::run_fanout(jobs, options);
  REQUIRE(results);
  REQUIRE(results->size() == kJobs);
  std::vector<std::string> own_stdout(kJobs);
  std::vector<std::vector<std::string>> open_fds(kJobs);
  for (int i = 0; i < kJobs; i++) {
    INFO("job " << i);
    std::istringstream lines((*results)[i].process.stdout_text);
    std::string index;
    std::getline(lines, index);
    CHECK(index == std::to_string(i));
    std::getline(lines, own_stdout[i]);
    CHECK(own_stdout[i].rfind("pipe:", 0) == 0);
    for (std::string line; std::getline(lines, line);) open_fds[i].push_back(line);
  }
  for (int i = 0; i < kJobs; i++) {
    for (int j = 0; j < kJobs; j++) {
      if (i == j) continue;
      INFO("job " << i << " holds job " << j << "'s stdout " << own_stdout[j]);
      CHECK(std::find(open_fds[i].begin(), open_fds[i].end(), own_stdout[j]) == open_fds[i].end());
    }
  }
}

TEST_CASE("fanout: every job of a batch is given its whole deadline", "[fanout]") {
  // Deadlines count from the batch's start (the spawning of the others is inside each one), and
  // no job is killed before its own has passed.
  std::vector<util::ProcessOptions> jobs;
  for (int i = 0; i < 40; i++) jobs.push_back(sh("sleep 30", 600ms));
  util::FanoutOptions options;
  options.max_parallel = 40;
  auto results = util::run_fanout(jobs, options);
  REQUIRE(results);
  for (const auto& r : *results) {
    CHECK(r.process.timed_out);
    CHECK(r.duration >= 600ms);
  }
}
