// SPDX-License-Identifier: Apache-2.0
// `vkpaged attend` against hostile paths, as inputs and as --out: symbolic links (to a file,
// to nothing, to a directory, to a device), devices, FIFOs with no writer or reader, sockets,
// directories and unreadable files. Each is refused with exit status 1 and one line on stderr
// naming the option and the path, without waiting (every run has a time limit), and leaves no
// file behind and every path as it was. A link to a regular file is followed: read as an input;
// as --out its target is replaced and the link stays. Also the exit statuses of the usage
// errors (2). Runs the CLI (VKPAGED_CLI) as a subprocess with --device cpu: no GPU needed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "npy.hpp"
#include "vkpaged/decode.hpp"

extern char** environ;

namespace vkpaged::cli {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;  // 128 + signal when killed
  bool timed_out = false;
  std::string err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs the CLI with stdin from /dev/null and stdout, stderr to files in `io`; kills it past
// `limit` (a refusal that waits on a FIFO would hang the test otherwise).
Outcome run_with_limit(const std::string& cli, const std::vector<std::string>& args, const fs::path& io,
                       std::chrono::seconds limit = std::chrono::seconds(15)) {
  const fs::path out = io / "stdout.txt", err = io / "stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv{const_cast<char*>(cli.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  Outcome r;
  const int spawned = posix_spawn(&pid, cli.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    r.err = "posix_spawn failed";
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = slurp(err);
  return r;
}

// Every entry of `dir` with its type, to compare before and after a refused run.
std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto st = fs::symlink_status(e.path());
    names.insert(e.path().filename().string() + ":" + std::to_string(int(st.type())));
  }
  return names;
}

class CliHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* cli = std::getenv("VKPAGED_CLI");
    if (cli == nullptr || *cli == '\0') GTEST_SKIP() << "VKPAGED_CLI is not set (ctest sets it to the vkpaged binary)";
    cli_ = cli;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    base_ = fs::temp_directory_path() / ("vkpaged_hostile_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(base_);
    dir_ = base_ / "work";
    io_ = base_ / "io";
    fs::create_directories(dir_);
    fs::create_directories(io_);
    write_inputs();
  }
  void TearDown() override {
    if (base_.empty()) return;
    std::error_code ec;
    fs::permissions(dir_ / "locked", fs::perms::owner_all, ec);
    fs::remove_all(base_, ec);
  }

  fs::path path(const std::string& name) const { return dir_ / name; }

  // A small valid f32 case: 2 sequences, 2 heads of 32, blocks of 16.
  void write_inputs() {
    HostTensor q(DType::f32, Shape{2, 2, 32}), k(DType::f32, Shape{3, 2, 8, 16, 4}), v(DType::f32, Shape{3, 2, 32, 16});
    for (HostTensor* t : {&q, &k, &v})
      for (int64_t i = 0; i < t->numel(); ++i) t->set(size_t(i), double((i * 37) % 17) / 17.0 - 0.5);
    HostTensor bt(DType::i32, Shape{2, 2}), cl(DType::i32, Shape{2});
    const int32_t tables[] = {0, 1, 2, 0}, lens[] = {20, 9};
    std::copy(std::begin(tables), std::end(tables), bt.as<int32_t>());
    std::copy(std::begin(lens), std::end(lens), cl.as<int32_t>());
    write_npy(path("q.npy"), q);
    write_npy(path("k.npy"), k);
    write_npy(path("v.npy"), v);
    write_npy(path("bt.npy"), bt);
    write_npy(path("cl.npy"), cl);
  }

  // attend's arguments with `option` (an input or --out) set to `value`; the others valid.
  std::vector<std::string> attend_args(const std::string& option, const std::string& value) const {
    std::vector<std::pair<std::string, std::string>> options = {
        {"--query", path("q.npy")},         {"--key-cache", path("k.npy")},    {"--value-cache", path("v.npy")},
        {"--block-tables", path("bt.npy")}, {"--context-lens", path("cl.npy")}, {"--out", path("out.npy")}};
    std::vector<std::string> args{"attend", "--device", "cpu"};
    for (auto& [name, file] : options) {
      if (name == option) file = value;
      args.push_back(name);
      args.push_back(file);
    }
    return args;
  }

  // The refusal the contract asks for: exit 1 in time, one line "vkpaged: <option>: <path>...",
  // and the directory as it was (no output, no temporary file, nothing replaced).
  void expect_refused(const std::string& option, const std::string& value, const std::string& what) {
    SCOPED_TRACE(option + " " + value + " (" + what + ")");
    const auto before = listing(dir_);
    const Outcome r = run_with_limit(cli_, attend_args(option, value), io_);
    EXPECT_FALSE(r.timed_out) << "the CLI waited instead of refusing";
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("vkpaged: " + option + ": " + value, 0), 0u) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_EQ(listing(dir_), before) << "a file was left behind, removed or replaced";
  }

  std::string cli_;
  fs::path base_, dir_, io_;
};

// A Unix socket bound at `p` (kept open for the test's length).
int bind_socket(const fs::path& p) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string s = p.string();
  EXPECT_LT(s.size(), sizeof(addr.sun_path));
  std::copy(s.begin(), s.end(), addr.sun_path);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << p;
  return fd;
}

TEST_F(CliHostileTest, InputsThatAreNotRegularFilesAreRefusedWithoutWaiting) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_directory(path("dir.npy"));
  fs::create_symlink(path("missing.npy"), path("dangling.npy"));
  fs::create_symlink(path("dir.npy"), path("to_dir.npy"));
  fs::create_symlink(path("fifo"), path("to_fifo.npy"));
  const int sock = bind_socket(path("sock"));
  expect_refused("--query", path("fifo"), "is a FIFO");                       // no writer: never opened
  expect_refused("--context-lens", path("fifo"), "is a FIFO");
  expect_refused("--key-cache", path("to_fifo.npy"), "is a FIFO");
  expect_refused("--query", path("dir.npy"), "is a directory");
  expect_refused("--value-cache", path("to_dir.npy"), "is a directory");
  expect_refused("--query", path("dangling.npy"), "symbolic link that leads to no existing file");
  expect_refused("--query", path("missing.npy"), "cannot open");
  expect_refused("--block-tables", path("sock"), "is a socket");
  expect_refused("--query", "/dev/null", "is a character device");
  expect_refused("--key-cache", "/dev/zero", "is a character device");  // endless: never read
  ::close(sock);
  if (::geteuid() == 0) {
    std::cout << "[ NOTE     ] running as root: an unreadable file cannot be made, that case is not run\n";
  } else {
    write_npy(path("locked.npy"), HostTensor(DType::f32, Shape{2, 2, 32}));
    fs::permissions(path("locked.npy"), fs::perms::none);
    expect_refused("--query", path("locked.npy"), "Permission denied");
  }
}

TEST_F(CliHostileTest, InputThroughASymbolicLinkIsRead) {
  fs::create_symlink(path("q.npy"), path("q_link.npy"));
  const Outcome r = run_with_limit(cli_, attend_args("--query", path("q_link.npy")), io_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_npy(path("out.npy")).shape(), (Shape{2, 2, 32}));
}

TEST_F(CliHostileTest, OutputsThatAreNotRegularFilesAreRefusedAndLeftAsTheyWere) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_directory(path("dir.npy"));
  fs::create_symlink(path("missing.npy"), path("dangling.npy"));
  fs::create_symlink(path("dir.npy"), path("to_dir.npy"));
  fs::create_symlink("/dev/null", path("to_null.npy"));
  fs::create_symlink(path("fifo"), path("to_fifo.npy"));
  const int sock = bind_socket(path("sock"));
  expect_refused("--out", path("fifo"), "is a FIFO");  // no reader: never opened
  expect_refused("--out", path("to_fifo.npy"), "a FIFO");
  expect_refused("--out", path("dir.npy"), "is a directory");
  expect_refused("--out", path("to_dir.npy"), "a directory");
  expect_refused("--out", path("dangling.npy"), "symbolic link that leads to no existing file");
  expect_refused("--out", path("to_null.npy"), "a character device");
  expect_refused("--out", path("sock"), "is a socket");
  ::close(sock);
  EXPECT_TRUE(fs::is_fifo(path("fifo")));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_FALSE(fs::exists(path("missing.npy"))) << "the dangling link's target was created";
  if (::geteuid() == 0) {
    // Only root can make a device node: one like /dev/null, inside the test's directory.
    ASSERT_EQ(::mknod(path("null_device").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << std::strerror(errno);
    expect_refused("--out", path("null_device"), "is a character device");
    EXPECT_TRUE(fs::is_character_file(path("null_device")));
  } else {
    fs::create_directory(path("locked"));
    fs::permissions(path("locked"), fs::perms::owner_read | fs::perms::owner_exec);
    expect_refused("--out", path("locked") / "out.npy", "Permission denied");
  }
}

TEST_F(CliHostileTest, OutputThroughSymbolicLinksReplacesTheirTargetAndKeepsTheLinks) {
  fs::create_directory(path("elsewhere"));
  std::ofstream(path("elsewhere") / "target.npy") << "an older file";
  fs::create_symlink(path("elsewhere") / "target.npy", path("link.npy"));
  fs::create_symlink(path("link.npy"), path("link_to_link.npy"));
  for (const char* link : {"link.npy", "link_to_link.npy"}) {
    SCOPED_TRACE(link);
    const Outcome r = run_with_limit(cli_, attend_args("--out", path(link)), io_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_TRUE(fs::is_symlink(path(link))) << "the link was replaced";
    EXPECT_EQ(read_npy(path("elsewhere") / "target.npy").shape(), (Shape{2, 2, 32}));
  }
  for (const fs::path& d : {dir_, path("elsewhere")})
    for (const auto& e : fs::directory_iterator(d))
      EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "temporary file left: " << e.path();
}

// Scales outside the contract's rule (docs/contract.md, "Scales"), refused before any file is
// read or device opened. Before: --k-scale 1e38 on an fp8 cache ran, and the GPU returned zeros.
TEST_F(CliHostileTest, ScalesOutsideTheRuleAreRefused) {
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  const Case cases[] = {
      {{"--kv-dtype", "fp8_e4m3", "--k-scale", "1e38"}, "--k-scale: 1e+38 is too large for an fp8_e4m3 cache"},
      {{"--kv-dtype", "fp8_e5m2", "--v-scale", "1e34"}, "--v-scale: 1e+34 is too large for an fp8_e5m2 cache"},
      {{"--kv-dtype", "fp8_e4m3", "--v-scale", "1e-39"}, "--v-scale: 1e-39 is too small for an fp8_e4m3 cache"},
      {{"--k-scale", "-1"}, "--k-scale: -1 is not a finite scale > 0"},
      {{"--scale", "-0.125"}, "--scale: -0.125 is not a finite scale > 0"},
      {{"--scale", "0"}, "--scale: 0 is not a finite scale > 0"},
  };
  for (const Case& c : cases) {
    auto args = attend_args("", "");
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const auto before = listing(dir_);
    const Outcome r = run_with_limit(cli_, args, io_);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err.rfind("vkpaged: " + c.message, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(listing(dir_), before);
  }
}

// 2 when the command line cannot be parsed, 1 when a parsed command fails, 0 for help.
TEST_F(CliHostileTest, ExitStatusesFollowOneScheme) {
  struct Case {
    std::vector<std::string> args;
    int status;
  };
  std::vector<std::string> bad_number = attend_args("", "");
  bad_number.insert(bad_number.end(), {"--scale", "abc"});
  std::vector<std::string> unknown = attend_args("", "");
  unknown.push_back("--no-such-option");
  std::vector<std::string> bad_value = attend_args("", "");
  bad_value.insert(bad_value.end(), {"--kv-dtype", "fp4"});
  const Case cases[] = {
      {{}, 2},                                  // no subcommand
      {{"no-such-command"}, 2},
      {{"attend", "--query", "q.npy"}, 2},      // required options missing
      {bad_number, 2},
      {unknown, 2},
      {bad_value, 1},                           // parsed, then refused
      {attend_args("--query", path("missing.npy")), 1},
      {{"--help"}, 0},
      {{"attend", "--help"}, 0},
      {{"--version"}, 0},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    const Outcome r = run_with_limit(cli_, c.args, io_);
    EXPECT_EQ(r.exit_code, c.status) << joined << "\n" << r.err;
    if (c.status != 0) EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined << "\n" << r.err;
  }
}

}  // namespace
}  // namespace vkpaged::cli
