// Subprocess and HarnessWorker against real processes: cat for the line channel, and the real
// share/harness/worker.py (with /usr/bin/python3, no torch preloaded) running small job scripts
// that exit, crash, hang, flood, kill their worker or try to forge its answer.
#include "cudaagent/sandbox/harness_worker.h"

#include <doctest/doctest.h>

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "cudaagent/base/files.h"
#include "cudaagent/base/paths.h"
#include "cudaagent/sandbox/subprocess.h"
#include "stop_support.h"
#include "test_support.h"

namespace cudaagent {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<std::string> plain_env() {
  return {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C.UTF-8"};
}

ProcessSpec cat_spec() {
  ProcessSpec spec;
  spec.argv = {"cat"};
  spec.env = plain_env();
  return spec;
}

TEST_CASE("Subprocess exchanges lines, times out, and sees the end of the child") {
  auto spawned = Subprocess::spawn(cat_spec(), "");
  REQUIRE(spawned);
  Subprocess& cat = spawned.value();
  CHECK(cat.running());
  REQUIRE(cat.send("first\nsecond\n", 5));
  auto line = cat.receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().kind == Subprocess::Line::Kind::kLine);
  CHECK(line.value().text == "first");
  line = cat.receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().text == "second");
  line = cat.receive_line(0.2, 100);
  REQUIRE(line);
  CHECK(line.value().kind == Subprocess::Line::Kind::kTimeout);
  REQUIRE(cat.send(std::string(300, 'x') + "\n", 5));
  line = cat.receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().kind == Subprocess::Line::Kind::kTooLong);
  cat.kill();
  CHECK_FALSE(cat.running());
  CHECK(cat.pid() == -1);
  CHECK_FALSE(cat.send("late\n", 1));
  line = cat.receive_line(1, 100);
  REQUIRE(line);
  CHECK(line.value().kind == Subprocess::Line::Kind::kClosed);
}

TEST_CASE("Subprocess reports a child that exits and one that cannot start") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo last; echo partial-no-newline >&2; exit 0"};
  spec.env = plain_env();
  TempDir dir;
  auto spawned = Subprocess::spawn(spec, dir.file("err.log"));
  REQUIRE(spawned);
  auto line = spawned.value().receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().text == "last");
  line = spawned.value().receive_line(5, 100);
  REQUIRE(line);
  CHECK(line.value().kind == Subprocess::Line::Kind::kClosed);
  CHECK(testing::read_file(dir.file("err.log")) == "partial-no-newline\n");

  spec.argv = {"/no/such/program"};
  auto missing = Subprocess::spawn(spec, "");
  REQUIRE_FALSE(missing);
  CHECK(missing.status().message().find("No such file") != std::string::npos);
}

TEST_CASE("a writer to a child that stopped reading gets an error, not SIGPIPE") {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "exec 0<&-; sleep 5"};
  spec.env = plain_env();
  auto spawned = Subprocess::spawn(spec, "");
  REQUIRE(spawned);
  ::usleep(200'000);
  const Status sent = spawned.value().send(std::string(1 << 20, 'x'), 2);
  CHECK_FALSE(sent);
}

// A worker on the real worker.py with a plain python and no preload.
struct WorkerFixture {
  TempDir dir;
  HarnessWorker worker{options()};

  HarnessWorkerOptions options() {
    HarnessWorkerOptions o;
    o.process.argv = {"/usr/bin/python3", "-I", "-B", share_dir() + "/harness/worker.py"};
    o.process.env = plain_env();
    o.process.timeout_seconds = 0;
    o.log_path = dir.file("worker.log");
    o.start_timeout_seconds = 30;
    return o;
  }

  HarnessJob job(const std::string& name, const std::string& code, double timeout = 20) {
    write_file(dir.file(name), code);
    HarnessJob j;
    j.script = dir.file(name);
    j.timeout_seconds = timeout;
    return j;
  }
};

TEST_CASE_FIXTURE(WorkerFixture, "a worker runs jobs in fresh children and reports how each ended") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  auto warm = worker.warm_up();
  REQUIRE_MESSAGE(warm, warm.status().message());
  CHECK(worker.starts() == 1);

  HarnessJob echo = job("echo.py", "import sys\nprint('seed', sys.stdin.readline().strip(), sys.argv[1:])\n"
                                   "sys.exit(3)\n");
  echo.args = {"--flag", "value"};
  echo.stdin_data = "12345\n";
  auto result = worker.run(echo);
  REQUIRE_MESSAGE(result, result.status().message());
  CHECK(result.value().outcome == ProcessResult::Outcome::kExited);
  CHECK(result.value().exit_code == 3);
  CHECK(result.value().err == "seed 12345 ['--flag', 'value']\n");

  // State a job leaves in its interpreter does not reach the next job.
  REQUIRE(worker.run(job("poison.py", "import json\njson.dumps = None\n")));
  result = worker.run(job("clean.py", "import json\nprint(json.dumps([1]))\n"));
  REQUIRE(result);
  CHECK(result.value().exit_code == 0);
  CHECK(result.value().err == "[1]\n");

  result = worker.run(job("segv.py", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"));
  REQUIRE(result);
  CHECK(result.value().outcome == ProcessResult::Outcome::kSignaled);
  CHECK(result.value().signal == SIGSEGV);
  CHECK(worker.starts() == 1);  // a crashed child costs no worker
}

TEST_CASE_FIXTURE(WorkerFixture, "scrubbed directories are empty when the next job starts") {
  // In the sandbox these are the private /tmp and /dev/shm: what one candidate leaves there
  // (files, folders, a FIFO) must not reach the next candidate of the same worker.
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  const std::string scratch = dir.file("scratch");
  REQUIRE(::mkdir(scratch.c_str(), 0700) == 0);
  HarnessJob leave = job("leave.py", "import os, sys\nd = sys.argv[1]\n"
                                     "open(os.path.join(d, 'note'), 'w').write('x')\n"
                                     "os.makedirs(os.path.join(d, 'deep', 'er'))\n"
                                     "os.mkfifo(os.path.join(d, 'fifo'))\n");
  leave.args = {scratch};
  leave.scrub_dirs = {scratch};
  auto left = worker.run(leave);
  REQUIRE_MESSAGE(left, left.status().message());
  CHECK(left.value().exit_code == 0);
  HarnessJob look = job("look.py", "import os, sys\nprint(sorted(os.listdir(sys.argv[1])))\n");
  look.args = {scratch};
  auto seen = worker.run(look);
  REQUIRE(seen);
  CHECK(seen.value().err == "[]\n");
  CHECK(::access(scratch.c_str(), F_OK) == 0);  // the directory itself stays
}

TEST_CASE("a job's process limit binds when the worker runs as another user than root") {
  // RLIMIT_NPROC does not bind root, which is what the machines run as: the candidate's worker
  // runs as nobody, where it does. Only root can start a worker as another user.
  if (::geteuid() != 0 || ::access("/usr/bin/python3", X_OK) != 0) return;
  TempDir dir;
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  write_file(dir.file("forks.py"),
             "import os, time\nmade = failed = 0\nfor _ in range(40):\n"
             "    try:\n        pid = os.fork()\n    except OSError:\n        failed += 1\n        continue\n"
             "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    made += 1\n"
             "print(made, failed)\n");
  REQUIRE(::chmod(dir.file("forks.py").c_str(), 0644) == 0);
  HarnessWorkerOptions options;
  options.process.argv = {"/usr/bin/python3", "-I", "-B", share_dir() + "/harness/worker.py"};
  options.process.env = plain_env();
  options.process.timeout_seconds = 0;
  options.process.run_as = ProcessCredentials{65534, 65534};
  options.log_path = dir.file("worker.log");
  options.start_timeout_seconds = 30;
  HarnessWorker worker(options);
  HarnessJob job;
  job.script = dir.file("forks.py");
  job.timeout_seconds = 60;
  job.limits.processes = 8;
  auto result = worker.run(job);
  REQUIRE_MESSAGE(result, result.status().message());
  int made = -1, failed = -1;
  REQUIRE(std::sscanf(result.value().err.c_str(), "%d %d", &made, &failed) == 2);
  CHECK(failed > 0);
  CHECK(made < 8);
  CHECK(result.value().stray_processes == made);  // and the worker ended them
}

TEST_CASE_FIXTURE(WorkerFixture, "a hung job or a killed worker costs one job, and the next gets a fresh worker") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  auto result = worker.run(job("hang.py", "import time\nwhile True: time.sleep(1)\n", 1.0));
  REQUIRE(result);
  CHECK(result.value().outcome == ProcessResult::Outcome::kTimedOut);
  result = worker.run(job("ok.py", "print('ok')\n"));
  REQUIRE(result);
  CHECK(result.value().err == "ok\n");
  CHECK(worker.starts() == 2);

  result = worker.run(job("regicide.py", "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\n"
                                         "time.sleep(3)\n"));
  REQUIRE(result);
  CHECK(result.value().outcome == ProcessResult::Outcome::kSignaled);
  CHECK(result.value().signal == SIGKILL);
  result = worker.run(job("ok2.py", "print('fine')\n"));
  REQUIRE(result);
  CHECK(result.value().err == "fine\n");
  CHECK(worker.starts() == 3);
}

TEST_CASE_FIXTURE(WorkerFixture, "a daemon a job leaves behind is ended before the answer, and counted") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  // Double fork and setsid (attack catalog case 38): the daemon is neither the job's child nor in its
  // session or process group. It writes its pid, then lives on.
  const std::string pid_file = dir.file("daemon.pid");
  auto result = worker.run(job("daemon.py", "import os, sys, time\n"
                                            "if os.fork() == 0:\n"
                                            "    os.setsid()\n"
                                            "    if os.fork() == 0:\n"
                                            "        with open('" + pid_file + ".tmp', 'w') as f: f.write(str(os.getpid()))\n"
                                            "        os.rename('" + pid_file + ".tmp', '" + pid_file + "')\n"
                                            "        while True: time.sleep(0.05)\n"
                                            "    os._exit(0)\n"
                                            "while not os.path.exists('" + pid_file + "'): time.sleep(0.01)\n"));
  REQUIRE_MESSAGE(result, result.status().message());
  CHECK(result.value().exit_code == 0);
  CHECK(result.value().stray_processes >= 1);
  std::string pid_text;
  REQUIRE(read_whole_file(pid_file, pid_text));
  const pid_t daemon = static_cast<pid_t>(std::stol(pid_text));
  CHECK(::kill(daemon, 0) != 0);  // gone (killed and reaped) by the time the answer came
  CHECK(worker.starts() == 1);

  // An honest job leaves nothing: the count is zero.
  result = worker.run(job("plain.py", "import subprocess\nsubprocess.run(['true'])\n"));
  REQUIRE(result);
  CHECK(result.value().exit_code == 0);
  CHECK(result.value().stray_processes == 0);
}

TEST_CASE_FIXTURE(WorkerFixture, "output is capped, limits reach the child, and a job cannot forge the answer") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  HarnessJob flood = job("flood.py", "import sys\nfor _ in range(2000): sys.stdout.write('x' * 10000)\n");
  flood.output_cap = 1000;
  auto result = worker.run(flood);
  REQUIRE(result);
  CHECK(result.value().err.size() == 1000);
  CHECK(result.value().err_truncated);

  HarnessJob big = job("bigfile.py", "import sys\nopen(sys.argv[1], 'wb').write(b'x' * 4_000_000)\n");
  big.args = {dir.file("big.bin")};
  big.limits.file_size_bytes = 1'000'000;
  result = worker.run(big);
  REQUIRE(result);
  CHECK(result.value().outcome == ProcessResult::Outcome::kSignaled);
  CHECK(result.value().signal == SIGXFSZ);

  // Write a forged answer everywhere this process could reach: its own descriptors, the parent's
  // through /proc. In the sandbox the worker is not dumpable and /proc/<worker>/fd is closed to
  // the job; here, as root without one, it may not be. Either way a forged answer is never taken:
  // the real one comes back, or the foreign line is refused (and the worker replaced).
  const std::string forge =
      "import os, json\n"
      "fake = (json.dumps({'job': 'forged', 'exit': 0, 'output': 'FORGED'}) + '\\n').encode()\n"
      "for fd in range(0, 64):\n"
      "    try: os.write(fd, fake)\n"
      "    except OSError: pass\n"
      "for n in range(0, 16):\n"
      "    try:\n"
      "        with open(f'/proc/{os.getppid()}/fd/{n}', 'wb') as f: f.write(fake)\n"
      "    except OSError: pass\n";
  result = worker.run(job("forge.py", forge));
  if (result) {
    CHECK(result.value().exit_code == 0);
    CHECK(result.value().err.find("FORGED") == std::string::npos);
  } else {
    CHECK(result.status().message().find("not this job's answer") != std::string::npos);
  }
  result = worker.run(job("after.py", "print('after')\n"));
  REQUIRE_MESSAGE(result, result.status().message());
  CHECK(result.value().err == "after\n");
}


TEST_CASE_FIXTURE(WorkerFixture, "a job runs on the CPUs it is given, and one it cannot have ends it") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(::sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
  int last = -1;
  for (int id = 0; id < CPU_SETSIZE; ++id) {
    if (CPU_ISSET(id, &allowed)) last = id;
  }
  REQUIRE(last >= 0);
  // The last allowed CPU alone, seen from inside the job and from a thread it starts.
  HarnessJob placed = job("placed.py", "import os, threading\n"
                                       "seen = []\n"
                                       "t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))\n"
                                       "t.start(); t.join()\n"
                                       "print(sorted(os.sched_getaffinity(0)), seen[0])\n");
  placed.cpus = {last};
  auto result = worker.run(placed);
  REQUIRE_MESSAGE(result, result.status().message());
  CHECK(result.value().exit_code == 0);
  const std::string one = "[" + std::to_string(last) + "]";
  CHECK(result.value().err == one + " " + one + "\n");

  // Without cpus the job keeps the worker's own placement.
  result = worker.run(job("free.py", "import os\nprint(len(os.sched_getaffinity(0)))\n"));
  REQUIRE(result);
  CHECK(result.value().err == std::to_string(CPU_COUNT(&allowed)) + "\n");

  // A CPU that does not exist: the job never runs its script, and says why.
  HarnessJob impossible = job("never.py", "print('ran')\n");
  impossible.cpus = {CPU_SETSIZE + 7};
  result = worker.run(impossible);
  REQUIRE(result);
  CHECK(result.value().exit_code == 70);
  CHECK(result.value().err.find("cannot place the job") != std::string::npos);
  CHECK(result.value().err.find("ran") == std::string::npos);
}

TEST_CASE_FIXTURE(WorkerFixture, "an interactive session relays lines both ways and ends like a job") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  // Echoes each command, upper-cased, on fd 3; a line on stdout goes to the captured output only.
  const std::string echo =
      "import os, sys\nreply = os.fdopen(3, 'w', buffering=1)\nprint('to stdout')\n"
      "for line in sys.stdin:\n"
      "    if line.strip() == 'quit': break\n"
      "    reply.write(line.upper())\n"
      "reply.write('{\"job\": \"forged\", \"exit\": 0}\\n')\n"
      "sys.exit(4)\n";
  auto session = worker.open_session(job("echo.py", echo));
  REQUIRE_MESSAGE(session, session.status().message());
  for (const char* word : {"first", "second"}) {
    REQUIRE(session.value().send(word));
    auto message = session.value().receive(20);
    REQUIRE_MESSAGE(message, message.status().message());
    REQUIRE(message.value().kind == HarnessSession::Message::Kind::kLine);
    std::string upper(word);
    for (char& c : upper) c = static_cast<char>(std::toupper(c));
    CHECK(message.value().text == upper);
  }
  auto quiet = session.value().receive(0.2);
  REQUIRE(quiet);
  CHECK(quiet.value().kind == HarnessSession::Message::Kind::kTimeout);
  REQUIRE(session.value().send("quit"));
  // The child's forged worker answer arrives as one of its own lines, then the real end.
  auto forged = session.value().receive(20);
  REQUIRE(forged);
  REQUIRE(forged.value().kind == HarnessSession::Message::Kind::kLine);
  CHECK(forged.value().text.find("forged") != std::string::npos);
  auto end = session.value().receive(20);
  REQUIRE(end);
  REQUIRE(end.value().kind == HarnessSession::Message::Kind::kEnded);
  CHECK(end.value().result.exit_code == 4);
  CHECK(end.value().result.err == "to stdout\n");
  CHECK(session.value().ended());

  // The worker takes ordinary jobs again; a session that hangs is closed by killing the worker.
  auto after = worker.run(job("after.py", "print('after')\n"));
  REQUIRE(after);
  CHECK(after.value().err == "after\n");
  auto hung = worker.open_session(job("hang.py", "import time\nwhile True: time.sleep(1)\n"));
  REQUIRE(hung);
  auto closed = hung.value().close(0.5);
  REQUIRE(closed);
  CHECK(closed.value().outcome == ProcessResult::Outcome::kTimedOut);
  const int starts = worker.starts();
  REQUIRE(worker.run(job("again.py", "print('again')\n")));
  CHECK(worker.starts() == starts + 1);
}

TEST_CASE_FIXTURE(WorkerFixture, "a close that crosses the job's own end is not taken for a job") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  // The child ends on its own at "quit"; the driver's close reaches the worker after that end (as
  // when a session owner exits on its exit command), and the next job must get its own answer.
  auto session = worker.open_session(job("quits.py", "import sys\nfor line in sys.stdin:\n    break\n"));
  REQUIRE_MESSAGE(session, session.status().message());
  REQUIRE(session.value().send("quit"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the worker answers the end first
  auto closed = session.value().close(20);
  REQUIRE_MESSAGE(closed, closed.status().message());
  CHECK(closed.value().outcome == ProcessResult::Outcome::kExited);
  const int starts = worker.starts();
  auto next = worker.run(job("next.py", "print('next')\n"));
  REQUIRE_MESSAGE(next, next.status().message());
  CHECK(next.value().err == "next\n");
  CHECK(worker.starts() == starts);  // the same worker, not one restarted after a stranger's answer
}

TEST_CASE("Subprocess's waits end on a stop request and leave the child to the caller (issue 16)") {
  auto spawned = Subprocess::spawn(cat_spec(), "");
  REQUIRE(spawned);
  Subprocess& cat = spawned.value();
  std::atomic<int> stop{0};
  cat.watch_stop(&stop);
  TempDir dir;
  write_file(dir.file("go"), "");
  Result<Subprocess::Line> line = Status::error("not run");
  {
    testing::StopWhenFileAppears stopper(stop, dir.file("go"));
    line = cat.receive_line(600, 100);  // cat says nothing: only the stop can end this wait
  }
  REQUIRE_FALSE(line);
  CHECK(line.status().message() == "stopped by signal 15 (SIGTERM)");
  CHECK(cat.running());
  cat.kill();
}

TEST_CASE_FIXTURE(WorkerFixture, "a stop request ends a job at once: the worker dies with it, and no result (issue 16)") {
  if (::access("/usr/bin/python3", X_OK) != 0) return;
  std::atomic<int> stop{0};
  HarnessWorkerOptions o = options();
  o.stop = &stop;
  HarnessWorker stoppable(o);
  REQUIRE(stoppable.warm_up());
  const std::string started = dir.file("started");
  Result<ProcessResult> result = Status::error("not run");
  {
    testing::StopWhenFileAppears stopper(stop, started);
    // A job that would hang past any test: only the stop ends it.
    result = stoppable.run(job("hang.py", "import time\nopen('" + started + "', 'w').close()\n"
                                          "while True: time.sleep(1)\n", 600));
  }
  REQUIRE_FALSE(result);
  CHECK(result.status().message() == "stopped by signal 15 (SIGTERM)");
  // Nothing more starts while the stop stands.
  auto again = stoppable.run(job("ok.py", "print('ok')\n"));
  REQUIRE_FALSE(again);
  CHECK(again.status().message().find("stopped") == 0);
}

}  // namespace
}  // namespace cudaagent
