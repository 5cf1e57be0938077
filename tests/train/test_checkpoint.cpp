#include "../common/test_support.hpp"
#include "../common/train_support.hpp"

#include <locus/train/checkpoint.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/layers.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/saved_parameters.hpp>
#include <locus/train/softmax_regression.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>
#if __has_include(<sys/wait.h>)
#  include <sys/stat.h>
#  include <sys/wait.h>
#  include <unistd.h>
#endif

using namespace locus;
using namespace locus::train;
using namespace locus_test;
namespace nn = locus::train::nn;

namespace {
std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/locus_" + name + "_" + std::to_string(::getpid());
}
std::vector<std::uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const std::string& path, const std::vector<std::uint8_t>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
/// save()'s temporaries (`path.locus-<pid>.` + six characters) left beside path.
std::size_t temporaries_beside(const std::string& path) {
  const std::filesystem::path p(path);
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(p.parent_path())) {
    const auto name = e.path().filename().string(), base = p.filename().string() + ".locus-";
    if (name.compare(0, base.size(), base) == 0) ++n;
  }
  return n;
}
/// Recomputes the trailing checksum, so that a test can damage one field and nothing else.
void reseal(std::vector<std::uint8_t>& b) {
  const std::uint64_t h = locus::train::detail::fnv1a(b.data(), b.size() - 8);
  for (int i = 0; i < 8; ++i) b[b.size() - 8 + std::size_t(i)] = std::uint8_t(h >> (8 * i));
}
[[maybe_unused]] fit_options with_checkpoints(const std::string& path, std::size_t every) {
  auto o = quiet(4, 64);  // 4 epochs of 8 steps
  o.checkpoint_path = path;
  o.checkpoint_every = every;
  return o;
}
}  // namespace

TEST_CASE("a checkpoint holds parameters, momentum and step, and loads back exactly", "[train][checkpoint]") {
  const auto path = temp_path("roundtrip");
  mlp<float> model({16, 8, 4}, 3);
  auto data = synthetic(256, 1);
  data_parallel<sync_average, cpu> a{model, sgd{0.1f, 0.9f}};
  auto o = quiet(1, 64);
  o.seed = 9;
  a.fit(data, o);
  a.save(path);
  CHECK_FALSE(std::ifstream(path + ".tmp").good());  // renamed, not left behind
  data_parallel<sync_average, cpu> b{model, sgd{0.1f, 0.9f}};
  b.load(path);
  const auto sa = a.state(), sb = b.state();
  CHECK(sb.parameters == sa.parameters);
  CHECK(sb.optimizer_state == sa.optimizer_state);
  CHECK(sb.optimizer_steps == sa.optimizer_steps);
  CHECK(sb.optimizer == "sgd");
  CHECK(sb.state_buffers == 1);
  CHECK(sb.steps == 4);
  CHECK(sb.seed == 9);
  CHECK(sb.shapes == std::vector<std::vector<std::uint64_t>>{{16, 8}, {8}, {8, 4}, {4}});
  std::remove(path.c_str());
}

TEST_CASE("a bad checkpoint is refused with the file and the fault named, and the trainer is untouched",
          "[train][checkpoint]") {
  const auto good = temp_path("good"), bad = temp_path("bad");
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> trainer{model, sgd{}};
  trainer.fit(synthetic(128, 2), quiet(1, 64));
  trainer.save(good);
  const auto bytes = file_bytes(good);
  data_parallel<sync_average, cpu> target{model, sgd{}};
  const auto before = target.state();
  auto refused = [&](std::vector<std::uint8_t> b) {
    write_bytes(bad, b);
    const auto message = error_of([&] { target.load(bad); });
    CHECK(target.state().parameters == before.parameters);
    CHECK(target.state().optimizer_state == before.optimizer_state);
    return message;
  };
  const std::string name = "locus: checkpoint " + bad + ": ";
  // Truncated: the checksum no longer matches the bytes before it.
  auto b = bytes;
  b.resize(b.size() - 100);
  CHECK(refused(b) == name + "checksum mismatch: the file is damaged or truncated (at byte offset " +
                          std::to_string(b.size() - 8) + ")");
  CHECK(refused({1, 2, 3}) == name + "truncated: the magic number needs 8 bytes, 3 remain (at byte offset 0)");
  b = bytes;
  b[0] = 'X';
  CHECK(refused(b) == name + "bad magic number (not a locus checkpoint) (at byte offset 0)");
  b = bytes;
  b[8] = 7;
  reseal(b);
  CHECK(refused(b) == name + "version 7, this build reads versions 1 to 4 (at byte offset 8)");
  b = bytes;
  b[100] ^= 0x40;  // one flipped bit in the parameters
  CHECK(refused(b) == name + "checksum mismatch: the file is damaged or truncated (at byte offset " +
                          std::to_string(b.size() - 8) + ")");
  b = bytes;
  b[12] = 2;  // element type
  reseal(b);
  CHECK(refused(b) == name + "element type 2, only float32 (1) is supported (at byte offset 12)");
  b = bytes;
  b[32] = 0xff;  // tensor count: 255 + ...
  b[38] = 0x7f;
  reseal(b);
  CHECK(refused(b).find("absurd tensor count") != std::string::npos);
  b = bytes;
  b[51] = 0x7f;  // the first extent's most significant byte: an absurd size
  reseal(b);
  CHECK(refused(b).find(": absurd extent") != std::string::npos);
  // A checkpoint of another model: checked against the trainer, nothing applied.
  data_parallel<sync_average, cpu> other{mlp<float>({16, 6, 4}, 3), sgd{}};
  other.save(bad);
  CHECK(error_of([&] { target.load(bad); }) ==
        name + "its tensors [[16, 6], [6], [6, 4], [4]] do not match the model's [[16, 8], [8], [8, 4], [4]]");
  CHECK(target.state().parameters == before.parameters);
  CHECK(error_of([&] { target.load(bad + ".missing"); }) ==
        "locus: checkpoint " + bad + ".missing: cannot open the file: No such file or directory");
  CHECK(error_of([&] { target.load(std::filesystem::temp_directory_path().string()); })
            .find("cannot read the file: it is a directory") != std::string::npos);
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("an adam checkpoint holds its moments and step counts, and a resumed fit equals the uninterrupted one",
          "[train][checkpoint][optim]") {
  const auto path = temp_path("adam");
  std::remove(path.c_str());
  auto data = synthetic(512, 2);
  const auto run = [&]<class... Ds>(std::type_identity<data_parallel<sync_average, Ds...>>) {
    using trainer = data_parallel<sync_average, Ds...>;
    {
      trainer first{mlp<float>({16, 12, 4}, 5), adam{1e-2f, 0.9f, 0.99f, 1e-7f, 1e-3f}};
      auto o = with_checkpoints(path, 10);
      o.max_steps = 20;
      first.fit(data, o);
      const auto saved = checkpoint::load(path);
      CHECK(saved.optimizer == "adam");
      CHECK(saved.state_buffers == 2);
      CHECK(saved.optimizer_steps == std::vector<std::uint64_t>(sizeof...(Ds), 20));
      REQUIRE(saved.optimizer_state.size() == sizeof...(Ds));
      CHECK(saved.optimizer_state[0].size() == 2 * first.parameter_count());
      CHECK(saved.optimizer_state[0] == first.state().optimizer_state[0]);
      trainer copy{mlp<float>({16, 12, 4}, 5), adam{1e-2f, 0.9f, 0.99f, 1e-7f, 1e-3f}};
      copy.load(path);
      CHECK(copy.state().optimizer_state == first.state().optimizer_state);
      CHECK(copy.state().optimizer_steps == first.state().optimizer_steps);
      CHECK(copy.parameters() == first.parameters());
    }
    trainer resumed{mlp<float>({16, 12, 4}, 5), adam{1e-2f, 0.9f, 0.99f, 1e-7f, 1e-3f}};
    const auto r = resumed.fit(data, with_checkpoints(path, 10));
    CHECK(r.resumed_from == 20);
    trainer straight{mlp<float>({16, 12, 4}, 5), adam{1e-2f, 0.9f, 0.99f, 1e-7f, 1e-3f}};
    straight.fit(data, quiet(4, 64));
    CHECK(resumed.parameters() == straight.parameters());  // exactly: the moments and t were restored
    CHECK(resumed.state().optimizer_state == straight.state().optimizer_state);
    CHECK(resumed.state().optimizer_steps == std::vector<std::uint64_t>(sizeof...(Ds), 32));
    std::remove(path.c_str());
  };
  run(std::type_identity<data_parallel<sync_average, cpu>>{});
#if LOCUS_HAS_GPUS
  run(std::type_identity<data_parallel<sync_average, cpu, gpu<0>>>{});
#endif
}

TEST_CASE("a checkpoint of another optimiser is refused with both named, and the trainer is untouched",
          "[train][checkpoint][optim]") {
  const auto path = temp_path("other-optimiser");
  mlp<float> model({16, 8, 4}, 3);
  auto data = synthetic(256, 1);
  data_parallel<sync_average, cpu> a{model, adam{1e-2f}}, w{model, adamw{1e-2f}}, momentum{model, sgd{0.1f, 0.9f}},
      plain{model, sgd{0.1f, 0.f}}, nesterov{model, sgd{0.1f, 0.9f, true}};
  a.fit(data, quiet(1, 64));
  w.fit(data, quiet(1, 64));
  momentum.fit(data, quiet(1, 64));
  const std::string name = "locus: checkpoint " + path + ": ";
  const auto refused = [&](auto& from, auto& into) {
    from.save(path);
    const auto before = into.state();
    const auto message = error_of([&] { into.load(path); });
    CHECK(into.state().parameters == before.parameters);
    CHECK(into.state().optimizer_state == before.optimizer_state);
    CHECK(into.state().optimizer_steps == before.optimizer_steps);
    return message;
  };
  CHECK(refused(a, momentum) == name + "written by adam (2 state buffers per parameter), this trainer's optimiser is "
                                       "sgd (1 state buffer per parameter)");
  CHECK(refused(a, w) == name + "written by adam (2 state buffers per parameter), this trainer's optimiser is adamw "
                                "(2 state buffers per parameter)");
  CHECK(refused(momentum, a) == name + "written by sgd (1 state buffer per parameter), this trainer's optimiser is "
                                       "adam (2 state buffers per parameter)");
  CHECK(refused(momentum, plain) == name + "written by sgd (1 state buffer per parameter), this trainer's optimiser "
                                           "is sgd (0 state buffers per parameter)");
  // Heavy ball and Nesterov keep the same state: one resumes the other's.
  momentum.save(path);
  nesterov.load(path);
  CHECK(nesterov.state().optimizer_state == momentum.state().optimizer_state);
#if LOCUS_HAS_GPUS
  data_parallel<sync_average, cpu, gpu<0>> two{model, adam{1e-2f}};
  CHECK(refused(two, a) == name + "optimiser state for 2 replicas, this trainer has 1");
#endif
  std::remove(path.c_str());
}

TEST_CASE("format 1 checkpoints (sgd's momentum) still load", "[train][checkpoint][optim]") {
  const auto path = temp_path("format1");
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> old{model, sgd{0.1f, 0.9f}};
  old.fit(synthetic(256, 1), quiet(1, 64));
  const auto s = old.state();
  // What the previous release wrote: the same header, then V momentum buffers, no name, no steps.
  locus::train::detail::byte_writer w;
  w.raw(checkpoint::magic, 8);
  w.u32(1);
  w.u32(checkpoint::float32);
  w.u64(s.steps);
  w.u64(s.seed);
  w.u64(s.shapes.size());
  for (const auto& shape : s.shapes) {
    w.u32(std::uint32_t(shape.size()));
    for (auto e : shape) w.u64(e);
  }
  w.u64(s.parameters.size());
  w.floats(s.parameters);
  w.u64(1);
  w.floats(s.optimizer_state[0]);
  w.u64(locus::train::detail::fnv1a(w.out.data(), w.out.size()));
  write_bytes(path, w.out);
  const auto c = checkpoint::load(path);
  CHECK(c.format == 1);
  CHECK(c.optimizer == "sgd");
  CHECK(c.state_buffers == 1);
  CHECK(c.optimizer_steps == std::vector<std::uint64_t>{0});
  data_parallel<sync_average, cpu> heavy{model, sgd{0.1f, 0.9f}}, plain{model, sgd{0.1f, 0.f}}, a{model, adam{}};
  heavy.load(path);
  CHECK(heavy.parameters() == s.parameters);
  CHECK(heavy.state().optimizer_state == s.optimizer_state);
  CHECK(heavy.state().steps == s.steps);
  plain.load(path);  // it saved a momentum buffer whatever the momentum; sgd without momentum drops it
  CHECK(plain.parameters() == s.parameters);
  CHECK(plain.state().optimizer_state == std::vector<std::vector<float>>{{}});
  CHECK(error_of([&] { a.load(path); }) ==
        "locus: checkpoint " + path +
            ": written by sgd (1 state buffer per parameter), this trainer's optimiser is adam (2 state buffers per "
            "parameter)");
  // Saved again, it is the current format, and equal.
  heavy.save(path);
  CHECK(checkpoint::load(path).format == checkpoint::version);
  CHECK(checkpoint::load(path).optimizer_state == s.optimizer_state);
  std::remove(path.c_str());
}

TEST_CASE("a damaged optimiser section is refused with the offset and the fault named", "[train][checkpoint][optim]") {
  const auto good = temp_path("optim-good"), bad = temp_path("optim-bad");
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> trainer{model, sgd{0.1f, 0.9f}};
  trainer.save(good);
  const auto bytes = file_bytes(good);
  const std::size_t n = trainer.parameter_count();
  // From the end: checksum, the loss scale and its step count, one stream position and their
  // count, one replica (steps + n floats), the replica count, S, "sgd", its length.
  const std::size_t at_name = bytes.size() - 8 - (8 + 8) - (8 + 8) - (8 + 4 * n) - 8 - 8 - 3 - 4;
  REQUIRE(std::string(bytes.begin() + std::ptrdiff_t(at_name + 4), bytes.begin() + std::ptrdiff_t(at_name + 7)) == "sgd");
  const std::string name = "locus: checkpoint " + bad + ": ";
  auto refused = [&](std::size_t at, std::uint8_t value) {
    auto b = bytes;
    b[at] = value;
    reseal(b);
    write_bytes(bad, b);
    return error_of([&] { checkpoint::load(bad); });
  };
  CHECK(refused(at_name, 0) ==
        name + "the optimiser's name has 0 bytes, not 1 to 32 (at byte offset " + std::to_string(at_name) + ")");
  CHECK(refused(at_name + 3, 0x80).find("the optimiser's name has 2147483651 bytes") != std::string::npos);
  CHECK(refused(at_name + 5, 'G') == name + "the optimiser's name holds a byte outside [a-z0-9_] (at byte offset " +
                                         std::to_string(at_name + 5) + ")");
  CHECK(refused(at_name + 7, 17) == name + "absurd state buffer count 17 per parameter (at byte offset " +
                                        std::to_string(at_name + 7) + ")");
  CHECK(refused(at_name + 7 + 8 + 4, 1) ==
        name + "absurd replica count 4294967297 (at byte offset " + std::to_string(at_name + 15) + ")");
  CHECK(refused(at_name + 7, 2) == name + "absurd replica count 1 (at byte offset " + std::to_string(at_name + 15) +
                                       ")");  // 2 buffers do not fit in the bytes left
  std::remove(good.c_str());
  std::remove(bad.c_str());
}

TEST_CASE("a crash while writing leaves the previous checkpoint whole", "[train][checkpoint]") {
  const auto path = temp_path("crash");
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> trainer{model, sgd{}};
  trainer.save(path);
  const auto saved = trainer.state().parameters;
  // What a crash mid-save leaves: a partial temporary file; the checkpoint itself is the old one.
  write_bytes(path + ".tmp", {'L', 'O', 'C'});
  data_parallel<sync_average, cpu> again{model, sgd{}};
  again.load(path);
  CHECK(again.state().parameters == saved);
  // The next save replaces the checkpoint and leaves no temporary of its own behind.
  trainer.save(path);
  CHECK(temporaries_beside(path) == 0);
  std::remove(path.c_str());
  std::remove((path + ".tmp").c_str());
}

TEST_CASE("save never writes through a link planted beside the checkpoint, and concurrent saves do not collide",
          "[train][checkpoint][security]") {
  const auto path = temp_path("planted");
  const auto victim = temp_path("victim");
  write_bytes(victim, {'k', 'e', 'e', 'p'});
  // The names an attacker can guess: the old fixed one, and a few of mkstemp's shape.
  std::remove((path + ".tmp").c_str());
  REQUIRE(::symlink(victim.c_str(), (path + ".tmp").c_str()) == 0);
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> trainer{model, sgd{}};
  trainer.save(path);
  CHECK(file_bytes(victim) == std::vector<std::uint8_t>{'k', 'e', 'e', 'p'});
  data_parallel<sync_average, cpu> loaded{model, sgd{}};
  loaded.load(path);
  CHECK(loaded.state().parameters == trainer.state().parameters);
  // Two trainers saving to one path at once: every save succeeds and the file is one of them, whole.
  std::vector<std::thread> savers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    savers.emplace_back([&] {
      for (int i = 0; i < 20; ++i) try {
          trainer.save(path);
        } catch (...) {
          ++failures;
        }
    });
  for (auto& t : savers) t.join();
  CHECK(failures == 0);
  loaded.load(path);
  CHECK(loaded.state().parameters == trainer.state().parameters);
  CHECK(temporaries_beside(path) == 0);
  // An unwritable place names the OS's reason.
  CHECK_THROWS_WITH(trainer.save("/nonexistent-dir/x.ckpt"), Catch::Contains("No such file or directory"));
  std::remove((path + ".tmp").c_str());
  std::remove(path.c_str());
  std::remove(victim.c_str());
}

TEST_CASE("a checkpoint path that cannot be written is refused before the first step", "[train][checkpoint][errors]") {
  auto data = synthetic(512, 2);
  data_parallel<sync_average, cpu> t{mlp<float>({16, 12, 4}, 5), sgd{0.1f, 0.9f}};
  const auto before = t.parameters();
  const std::string missing = temp_path("no-such-folder") + "/ck.bin";
  std::size_t steps = 0;
  auto o = with_checkpoints(missing, 10);
  o.on_step = [&](const progress&) { ++steps; };
  CHECK(locus_test::error_of([&] { (void)t.fit(data, o); }) ==
        "locus: checkpoint " + missing + ": cannot create a temporary file beside it: No such file or directory");
  const std::string folder = temp_path("a-folder");
  std::filesystem::create_directories(folder);
  CHECK(locus_test::error_of([&] { (void)t.fit(data, with_checkpoints(folder, 10)); }) ==
        "locus: checkpoint " + folder + ": it is a directory; a checkpoint is a file");
#if defined(__linux__)
  // A FIFO is not a checkpoint: refused, not opened (the open would wait for a writer forever).
  const std::string fifo = temp_path("fifo");
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(locus_test::error_of([&] { (void)t.fit(data, with_checkpoints(fifo, 10)); }) ==
        "locus: checkpoint " + fifo + ": it is not a regular file");
  std::remove(fifo.c_str());
#endif
  CHECK(steps == 0);
  CHECK(t.parameters() == before);
  std::filesystem::remove(folder);
  // A writable place: the probe leaves no file behind.
  const auto path = temp_path("probe");
  checkpoint::check_writable(path);
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(temporaries_beside(path) == 0);
}

TEST_CASE("a resumed fit's progress counts only the steps it ran", "[train][checkpoint]") {
  const auto path = temp_path("resumed-rate");
  auto data = synthetic(512, 2);
  {
    data_parallel<sync_average, cpu> first{mlp<float>({16, 12, 4}, 5), sgd{0.1f, 0.9f}};
    auto o = with_checkpoints(path, 10);
    o.max_steps = 20;
    first.fit(data, o);
  }
  data_parallel<sync_average, cpu> resumed{mlp<float>({16, 12, 4}, 5), sgd{0.1f, 0.9f}};
  auto o = with_checkpoints(path, 10);
  o.log_every = 10;
  o.print = [](const std::string&) {};
  std::vector<progress> lines;
  o.on_step = [&](const progress& p) {
    if (p.sec_per_batch > 0) lines.push_back(p);
  };
  REQUIRE(resumed.fit(data, o).resumed_from == 20);
  REQUIRE(lines.size() == 1);  // step 30 (32 is not a multiple of 10)
  CHECK(lines[0].step == 30);
  // The first line covers steps 21-30 since the fit started: 10 steps, not 30.
  CHECK(lines[0].sec_per_batch * 10 == Approx(lines[0].wall_seconds).epsilon(1e-6));
  CHECK(lines[0].examples_per_sec * lines[0].wall_seconds == Approx(10.0 * 64).epsilon(1e-6));
  // The checkpoint now has the whole run's 32 steps. A fit whose whole run is shorter (batch 128:
  // 16 steps) was written by another run: refused, the trainer untouched.
  REQUIRE(checkpoint::load(path).steps == 32);
  auto bigger = with_checkpoints(path, 10);
  bigger.batch = 128;
  const auto params = resumed.parameters();
  CHECK(error_of([&] { (void)resumed.fit(data, bigger); }) ==
        "locus: checkpoint " + path + ": 32 steps done, past the end of this fit (16 steps in all): written by a run "
        "with another batch, epochs or max_steps");
  CHECK(resumed.parameters() == params);
  std::remove(path.c_str());
}

#if defined(__linux__) && LOCUS_HAS_GPUS
// The child of the next test: trains with checkpoints every 10 steps and kills itself (SIGKILL,
// nothing flushed, nothing cleaned up) after step LOCUS_TEST_KILL_AT.
TEST_CASE("checkpoint child", "[.checkpoint-child]") {
  const char* path = std::getenv("LOCUS_TEST_CHECKPOINT");
  const char* kill_at = std::getenv("LOCUS_TEST_KILL_AT");
  REQUIRE(path != nullptr);
  REQUIRE(kill_at != nullptr);
  const std::size_t at = std::strtoull(kill_at, nullptr, 10);
  data_parallel<sync_average, cpu, gpu<0>> trainer{mlp<float>({16, 12, 4}, 5), sgd{0.1f, 0.9f}};
  auto o = with_checkpoints(path, 10);
  o.on_step = [&](const progress& p) {
    if (p.step == at) std::raise(SIGKILL);
  };
  trainer.fit(synthetic(512, 2), o);
}

TEST_CASE("a run killed mid-training resumes from its checkpoint to the uninterrupted run's parameters",
          "[train][checkpoint][sync]") {
  const auto path = temp_path("killed");
  std::remove(path.c_str());
  char self[4096] = {};
  REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);  // this test program
  const std::string child = "LOCUS_TEST_CHECKPOINT=" + path + " LOCUS_TEST_KILL_AT=25 '" + self +
                            "' '[.checkpoint-child]' > /dev/null 2>&1";
  const int status = std::system(child.c_str());
  REQUIRE((WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL)));
  // The child wrote checkpoints at steps 10 and 20, then died at 25.
  REQUIRE(checkpoint::load(path).steps == 20);
  auto data = synthetic(512, 2);
  data_parallel<sync_average, cpu, gpu<0>> resumed{mlp<float>({16, 12, 4}, 5), sgd{0.1f, 0.9f}};
  const auto r = resumed.fit(data, with_checkpoints(path, 10));
  CHECK(r.resumed_from == 20);
  CHECK(r.curve.size() == 4 * 8 - 20);
  data_parallel<sync_average, cpu, gpu<0>> straight{mlp<float>({16, 12, 4}, 5), sgd{0.1f, 0.9f}};
  straight.fit(data, quiet(4, 64));
  CHECK(resumed.parameters() == straight.parameters());  // exactly
  CHECK(checkpoint::load(path).steps == 32);              // the end of the resumed fit
  // Another seed is another data order: refused.
  auto o = with_checkpoints(path, 10);
  o.seed = 1;
  CHECK(error_of([&] { resumed.fit(data, o); }).find("written with seed 0, this fit has seed 1") != std::string::npos);
  std::remove(path.c_str());
}
#endif

TEST_CASE("non-finite steps: thrown, skipped or stopping the run, never applied", "[train][faults]") {
  auto data = synthetic(512, 3);
  for (bool loss : {true, false}) {
    // The fourth step turns NaN.
    data_parallel<sync_average, cpu> reference{softmax_regression<float>(16, 4), sgd{0.1f, 0.9f}};
    auto three = quiet(1, 64);
    three.max_steps = 3;
    reference.fit(data, three);
    {
      data_parallel<sync_average, cpu> t{poisoned_model(16, 4, 3, loss), sgd{0.1f, 0.9f}};
      const auto message = error_of([&] { t.fit(data, quiet(1, 64)); });
      CHECK(message.rfind("locus: fit: step 4: the loss (", 0) == 0);
      CHECK(message.find(") or the gradient is not finite; the step is not applied") != std::string::npos);
      CHECK((message.find("nan") != std::string::npos) == loss);
      CHECK(t.parameters() == reference.parameters());
    }
    // Every policy, one worker each (so hogwild is deterministic): stopping ends where sync
    // stops and records the steps taken (3), not the 8 planned; a skipped step is a step taken.
    auto stop_and_skip = [&]<class Policy>(Policy policy) {
      auto o = quiet(1, 64);
      o.on_non_finite = non_finite::stop;
      data_parallel<Policy, cpu> t{poisoned_model(16, 4, 3, loss), sgd{0.1f, 0.9f}, policy};
      const auto r = t.fit(data, o);
      CHECK(r.stopped);
      CHECK(r.curve.size() == 3);
      CHECK(t.state().steps == 3);
      CHECK(t.parameters() == reference.parameters());
      o.on_non_finite = non_finite::skip_step;
      data_parallel<Policy, cpu> s{poisoned_model(16, 4, 3, loss), sgd{0.1f, 0.9f}, policy};
      const auto skipped = s.fit(data, o);
      CHECK(skipped.skipped == 1);
      CHECK(skipped.curve.size() == 8);
      CHECK(s.state().steps == 8);
      const auto p = s.parameters();
      CHECK(std::all_of(p.begin(), p.end(), [](float v) { return std::isfinite(v); }));
    };
    stop_and_skip(sync_average{});
    stop_and_skip(hogwild{.lookahead = false});  // one worker without look-ahead: sync's steps
    stop_and_skip(local_sgd{});                   // one replica: averaging changes nothing
  }
}

// Hostile use, third round (issue 26).

// Item 4: the dropout stream is each replica's count of loss_and_grad calls, saved in the
// checkpoint (format 3). Before, a resumed run drew other masks: max difference 0.044.
TEST_CASE("a resumed fit of a model with dropout equals the uninterrupted one", "[train][checkpoint][dropout]") {
  const auto path = temp_path("dropout");
  std::remove(path.c_str());
  auto data = synthetic(512, 2);
  const sequential model{nn::dense(16, 32), nn::relu, nn::dropout(0.3), nn::dense(32, 4)};
  const auto run = [&]<class... Ds>(std::type_identity<data_parallel<sync_average, Ds...>>) {
    using trainer = data_parallel<sync_average, Ds...>;
    checkpoint at20;
    {
      trainer first{model, sgd{0.1f, 0.9f}};
      auto o = with_checkpoints(path, 10);
      o.max_steps = 20;
      first.fit(data, o);
      at20 = checkpoint::load(path);
      CHECK(at20.streams == std::vector<std::uint64_t>(sizeof...(Ds), 20));
    }
    trainer resumed{model, sgd{0.1f, 0.9f}};
    CHECK(resumed.fit(data, with_checkpoints(path, 10)).resumed_from == 20);
    trainer straight{model, sgd{0.1f, 0.9f}};
    straight.fit(data, quiet(4, 64));
    CHECK(resumed.parameters() == straight.parameters());
    // Without the positions (a format 2 file) the masks restart: another run, as before the fix.
    at20.streams.clear();
    at20.save(path);
    trainer restarted{model, sgd{0.1f, 0.9f}};
    CHECK(restarted.fit(data, with_checkpoints(path, 10)).resumed_from == 20);
    CHECK(restarted.parameters() != straight.parameters());
    std::remove(path.c_str());
  };
  run(std::type_identity<data_parallel<sync_average, cpu>>{});
#if LOCUS_HAS_GPUS
  run(std::type_identity<data_parallel<sync_average, cpu, gpu<0>>>{});
#endif
}

TEST_CASE("a format 2 checkpoint (no stream positions) still loads, its streams starting at 0",
          "[train][checkpoint]") {
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> t{model, sgd{0.1f, 0.9f}};
  auto c = t.state();
  c.streams.clear();
  auto b = c.serialize();
  // Format 4 ends with the stream count (0 here) and the loss scale (16 bytes) before the
  // checksum: drop them, say version 2.
  b.erase(b.end() - 32, b.end() - 8);
  b[8] = 2;
  reseal(b);
  const auto back = checkpoint::parse(b.data(), b.size(), "v2");
  CHECK(back.format == 2);
  CHECK(back.streams.empty());
  CHECK(back.parameters == c.parameters);
}

TEST_CASE("a format 3 checkpoint (no loss scale) still loads, and a bad loss scale is refused at its offset",
          "[train][checkpoint]") {
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> t{model, sgd{0.1f, 0.9f}};
  const auto c = t.state();
  CHECK(c.loss_scale == 0);  // a float model has none
  auto b = c.serialize();
  auto v3 = b;
  v3.erase(v3.end() - 24, v3.end() - 8);
  v3[8] = 3;
  reseal(v3);
  const auto back = checkpoint::parse(v3.data(), v3.size(), "v3");
  CHECK(back.format == 3);
  CHECK(back.loss_scale == 0);
  CHECK(back.parameters == c.parameters);
  // The scale's field: 8 bytes before its step count and the checksum.
  const std::size_t at = b.size() - 24;
  for (double bad : {-1.0, 3.0, 0x1p-25, 0x1p65, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN(), -0.0}) {
    INFO(bad);
    auto d = b;
    const auto bits = std::bit_cast<std::uint64_t>(bad);
    for (int i = 0; i < 8; ++i) d[at + std::size_t(i)] = std::uint8_t(bits >> (8 * i));
    reseal(d);
    const auto message = error_of([&] { (void)checkpoint::parse(d.data(), d.size(), "f"); });
    CHECK(message.find("(0, or a power of two from 2^-24 to 2^64) (at byte offset " + std::to_string(at) + ")") !=
          std::string::npos);
    auto written = c;
    written.loss_scale = bad;
    CHECK(error_of([&] { (void)written.serialize(); }).find("cannot be written: a loss scale") != std::string::npos);
  }
  // Its finite-step count: below 2000 (the scale doubles there), 0 without a scale.
  for (const auto& [scale, steps] : {std::pair{1024.0, std::uint64_t{2000}}, std::pair{0.0, std::uint64_t{5}}}) {
    auto d = b;
    const auto bits = std::bit_cast<std::uint64_t>(scale);
    for (int i = 0; i < 8; ++i) {
      d[at + std::size_t(i)] = std::uint8_t(bits >> (8 * i));
      d[at + 8 + std::size_t(i)] = std::uint8_t(steps >> (8 * i));
    }
    reseal(d);
    CHECK(error_of([&] { (void)checkpoint::parse(d.data(), d.size(), "f"); })
              .find("finite steps since the loss scale changed (below 2000, 0 without a scale) (at byte offset " +
                    std::to_string(at + 8) + ")") != std::string::npos);
  }
  auto scaled = c;
  scaled.loss_scale = 1024;
  scaled.loss_scale_steps = 1999;
  const auto bytes = scaled.serialize();
  const auto again = checkpoint::parse(bytes.data(), bytes.size(), "scaled");
  CHECK(again.loss_scale == 1024);
  CHECK(again.loss_scale_steps == 1999);
}

namespace {
/// An optimiser whose name a checkpoint cannot hold ([a-z0-9_]{1,32}).
struct camel_sgd : sgd {
  static constexpr const char* name = "SignSGD";
};
}  // namespace

// Item 12: what the reader refuses, the writer refuses first.
TEST_CASE("a checkpoint the reader would refuse is refused before it is written, and before the first step",
          "[train][checkpoint][errors]") {
  const auto path = temp_path("unreadable");
  std::remove(path.c_str());
  auto data = synthetic(512, 2);
  data_parallel<sync_average, cpu> t{mlp<float>({16, 8, 4}, 3), camel_sgd{}};
  std::size_t steps = 0;
  auto o = with_checkpoints(path, 4);
  o.on_step = [&](const progress&) { ++steps; };
  const auto m = locus_test::error_of([&] { (void)t.fit(data, o); });
  CHECK(m.find("locus: checkpoint " + path + ": cannot be written: the optimiser's name \"SignSGD\" holds a "
               "character outside [a-z0-9_]") == 0);
  CHECK(steps == 0);
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_THROWS_AS(t.save(path), checkpoint_error);
  CHECK_FALSE(std::filesystem::exists(path));
  // Without checkpoints it trains.
  CHECK(t.fit(data, quiet(1, 64)).curve.size() == 8);
  // A tensor of rank 9: the reader's limit is 8.
  checkpoint c = t.state();
  c.shapes.push_back(std::vector<std::uint64_t>(9, 1));
  c.parameters.push_back(0.f);
  c.optimizer = "sgd";
  c.optimizer_state.clear();
  CHECK(locus_test::error_of([&] { c.save(path); }) ==
        "locus: checkpoint " + path + ": cannot be written: tensor 4 has rank 9, at most 8");
  c.shapes.pop_back();
  c.parameters.pop_back();
  c.optimizer = "";
  CHECK_THROWS_AS(c.serialize(), checkpoint_error);
  c.optimizer = std::string(33, 'a');
  CHECK_THROWS_AS(c.serialize(), checkpoint_error);
  c.optimizer = "sgd";
  c.parameters.push_back(1.f);  // shapes no longer add up
  CHECK_THROWS_AS(c.serialize(), checkpoint_error);
  CHECK_FALSE(std::filesystem::exists(path));
}

#if defined(__linux__)
// Smaller items: a link to a directory is refused by save() as by fit's check; a killed save's
// temporary is removed by the next save to the same path, a live process's is not.
TEST_CASE("save refuses a link to a directory, and removes the temporaries of killed saves", "[train][checkpoint]") {
  mlp<float> model({16, 8, 4}, 3);
  data_parallel<sync_average, cpu> t{model, sgd{}};
  const auto folder = temp_path("linked-folder"), link = temp_path("link-to-folder");
  std::filesystem::create_directories(folder);
  std::remove(link.c_str());
  REQUIRE(::symlink(folder.c_str(), link.c_str()) == 0);
  CHECK(locus_test::error_of([&] { t.save(link); }) ==
        "locus: checkpoint " + link + ": it is a directory; a checkpoint is a file");
  CHECK(std::filesystem::is_symlink(link));
  std::remove(link.c_str());
  std::filesystem::remove(folder);

  const auto path = temp_path("stale");
  // A process that has ended: a child, waited for.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  const auto stale = path + ".locus-" + std::to_string(child) + ".AbC123";
  const auto live = path + ".locus-" + std::to_string(::getpid()) + ".XyZ789";
  const auto other = path + ".locus-x1.AbC123";  // not a temporary of save's: left alone
  for (const auto& f : {stale, live, other}) write_bytes(f, {'x'});
  t.save(path);
  CHECK_FALSE(std::filesystem::exists(stale));
  CHECK(std::filesystem::exists(live));
  CHECK(std::filesystem::exists(other));
  for (const auto& f : {live, other, path}) std::remove(f.c_str());
}

// Item 13: a large file that is not a checkpoint is refused after its first bytes.
TEST_CASE("load refuses a huge file that is not a checkpoint without reading it", "[train][checkpoint][errors]") {
  const auto path = temp_path("huge");
  {
    std::ofstream out(path, std::ios::binary);
    out << "NOTACKPT";
  }
  // 64 GiB, sparse: reading it whole would take minutes or fail to allocate.
  if (::truncate(path.c_str(), std::int64_t{1} << 36) != 0) {
    WARN("no sparse file of 64 GiB here; skipped");
    std::remove(path.c_str());
    return;
  }
  CHECK(locus_test::error_of([&] { (void)checkpoint::load(path); }) ==
        "locus: checkpoint " + path + ": bad magic number (not a locus checkpoint) (at byte offset 0)");
  // A real checkpoint's magic with a bogus size: the same file grown is refused by its checks
  // (the checksum), never by a bare std::bad_alloc.
  data_parallel<sync_average, cpu> t{mlp<float>({16, 8, 4}, 3), sgd{}};
  t.save(path);
  REQUIRE(::truncate(path.c_str(), std::int64_t{1} << 20) == 0);
  const auto m = locus_test::error_of([&] { (void)checkpoint::load(path); });
  CHECK(m.find("locus: checkpoint " + path + ": ") == 0);
  std::remove(path.c_str());
}
#endif

// Issue 30, part 7: a model's parameters alone, without a trainer.
TEST_CASE("save_parameters and load_parameters: a model's parameters alone, on any device, checked",
          "[train][checkpoint][parameters]") {
  const auto path = temp_path("parameters"), from_trainer = temp_path("parameters_trainer");
  const sequential model{nn::dense(16, 8), nn::relu, nn::dense(8, 4)};
  const auto data = synthetic(256, 3);
  data_parallel<sync_average, cpu> trainer{model, sgd{0.2f, 0.9f}};
  (void)trainer.fit(data, quiet(2, 32));
  auto trained = model.init<cpu>();
  trainer.parameters_into(trained);
  save_parameters(path, trained);
  // Read back on the cpu and on a GPU: the same values, the same predictions, no trainer.
  auto back = model.with_seed(9).init<cpu>();
  REQUIRE(flat(back) != flat(trained));
  load_parameters(path, back);
  CHECK(flat(back) == flat(trained));
  CHECK(model.predict(back, data.images).to_vector() == model.predict(trained, data.images).to_vector());
#if LOCUS_HAS_GPUS
  auto on_gpu = model.init<gpu<1>>();
  load_parameters(path, on_gpu);
  CHECK(flat(on_gpu) == flat(trained));
  save_parameters(path, on_gpu);  // and written from a GPU
  auto again = model.with_seed(5).init<cpu>();
  load_parameters(path, again);
  CHECK(flat(again) == flat(trained));
#endif
  // A trainer's checkpoint holds the same parameters (its optimiser state is not read).
  trainer.save(from_trainer);
  auto from_ckpt = model.with_seed(7).init<cpu>();
  load_parameters(from_trainer, from_ckpt);
  CHECK(flat(from_ckpt) == trainer.parameters());
  // Another model's shapes: named, nothing written.
  const sequential wider{nn::dense(16, 9), nn::relu, nn::dense(9, 4)};
  auto other = wider.init<cpu>();
  const auto before = flat(other);
  CHECK(error_of([&] { load_parameters(path, other); }) ==
        "locus: load_parameters: " + path + " holds tensors [[16, 8], [8], [8, 4], [4]], the parameter set has "
        "[[16, 9], [9], [9, 4], [4]]");
  CHECK(flat(other) == before);
  // Missing, truncated and damaged files: checkpoint_error, nothing written.
  CHECK_THROWS_AS(load_parameters(path + ".missing", other), checkpoint_error);
  auto bytes = file_bytes(path);
  write_bytes(path, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + std::ptrdiff_t(bytes.size() / 2)));
  auto victim = model.with_seed(3).init<cpu>();
  const auto untouched = flat(victim);
  CHECK_THROWS_AS(load_parameters(path, victim), checkpoint_error);
  bytes[bytes.size() / 2] ^= 0x40;  // one bit flipped: the checksum
  write_bytes(path, bytes);
  CHECK_THROWS_AS(load_parameters(path, victim), checkpoint_error);
  CHECK(flat(victim) == untouched);
  // A parameter set with a tensor that has no storage (a default-constructed rank 0): the shapes
  // agree ([] is [] ) but the element counts do not; refused, nothing shifted.
  {
    using set = parameter_tuple<std::tuple<tensor<float, cpu, 0>, tensor<float, cpu, 2>>>;
    set full{{tensor<float, cpu, 0>(shape<0>{}, 7.f), tensor<float, cpu, 2>{{1.f, 2.f}, {3.f, 4.f}}}};
    save_parameters(path, full);
    set hollow{{tensor<float, cpu, 0>{}, tensor<float, cpu, 2>(shape{2, 2}, 0.f)}};
    CHECK(error_of([&] { load_parameters(path, hollow); }).find("tensor 0 of the parameter set holds 0 elements") !=
          std::string::npos);
    CHECK(std::get<1>(hollow.tensors).to_vector() == std::vector<float>(4, 0.f));
    set back{{tensor<float, cpu, 0>(shape<0>{}, 0.f), tensor<float, cpu, 2>(shape{2, 2}, 0.f)}};
    load_parameters(path, back);
    CHECK(flat(back) == std::vector<float>{7.f, 1.f, 2.f, 3.f, 4.f});
  }
  // A folder is not a file to write.
  CHECK_THROWS_AS(save_parameters(std::filesystem::temp_directory_path().string(), trained), checkpoint_error);
  std::remove(path.c_str());
  std::remove(from_trainer.c_str());
}

// ---- per-epoch validation and on_epoch (issue 30, part 5) ----

namespace {
/// Softmax regression whose loss_and_grad takes a random stream (as dropout's do) and which has no
/// loss(p, x, y): it cannot be evaluated.
struct streaming : softmax_regression<float> {
  using softmax_regression<float>::softmax_regression;
  using softmax_regression<float>::loss_and_grad;
  template <device D>
  auto loss_and_grad(const params<D>& p, const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y,
                     std::uint64_t) const {
    return softmax_regression<float>::loss_and_grad(p, x, y);
  }
};
}  // namespace

TEST_CASE("validation each epoch: history, lines, and the training run unchanged", "[train][checkpoint]") {
  const auto data = synthetic(640, 8), val = synthetic(250, 9);
  // Dropout: the evaluation must draw nothing, or the masks after it would differ.
  const sequential model{nn::dense(16, 32), nn::relu, nn::dropout(0.3), nn::dense(32, 4)};
  auto o = quiet(3, 64);
  std::vector<std::string> lines;
  o.log_every = 5;
  o.print = [&](const std::string& line) { lines.push_back(line); };
  data_parallel<sync_average, cpu> plain{model, sgd{0.2f, 0.9f}}, checked{model, sgd{0.2f, 0.9f}};
  const auto r0 = plain.fit(data, o);
  o.validation = &val;
  const auto r = checked.fit(data, o);
  CHECK(checked.parameters() == plain.parameters());
  CHECK(r0.history.empty());
  REQUIRE(r.history.size() == 3);
  for (std::size_t e = 0; e < 3; ++e) {
    CHECK(r.history[e].epoch == e);
    CHECK(r.history[e].step == (e + 1) * 10);
    double sum = 0;
    for (std::size_t s = e * 10; s < (e + 1) * 10; ++s) sum += r.curve[s].loss;
    CHECK(std::abs(r.history[e].loss - sum / 10) < 1e-12);
    CHECK(std::isfinite(r.history[e].validation_loss));
  }
  CHECK(r.history[2].validation_loss == checked.mean_loss(val));
  CHECK(r.history[2].validation_accuracy == checked.accuracy(val));
  CHECK(r.history[2].validation_loss < r.history[0].validation_loss);
  // One line per epoch after the step lines of its last step.
  char want[160];
  std::snprintf(want, sizeof want, "epoch 3 (step 30): loss = %.4f; validation loss = %.4f, accuracy = %.4f",
                r.history[2].loss, r.history[2].validation_loss, r.history[2].validation_accuracy);
  REQUIRE(!lines.empty());
  CHECK(lines.back() == want);
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("epoch ", 0) == 0; }) == 3);
  // max_steps in the middle of an epoch: the last summary at the last step.
  o.max_steps = 15;
  data_parallel<sync_average, cpu> cut{model, sgd{0.2f, 0.9f}};
  const auto rc = cut.fit(data, o);
  REQUIRE(rc.history.size() == 2);
  CHECK(rc.history[1].step == 15);
  CHECK(rc.history[1].epoch == 1);
}

TEST_CASE("on_epoch stops the fit at the end of an epoch, and a resumed fit ends as the uninterrupted one",
          "[train][checkpoint]") {
  const auto data = synthetic(512, 3), val = synthetic(200, 4);
  const sequential model{nn::dense(16, 16), nn::relu, nn::dropout(0.2), nn::dense(16, 4)};
  const auto path = temp_path("on-epoch");
  std::remove(path.c_str());
  auto o = quiet(4, 64);
  data_parallel<sync_average, cpu> whole{model, sgd{0.1f, 0.9f}};
  (void)whole.fit(data, o);
  o.checkpoint_path = path;
  o.validation = &val;
  std::vector<std::size_t> seen;
  o.on_epoch = [&](const epoch_summary& e) {
    seen.push_back(e.epoch);
    return e.epoch < 1;  // stop after the second epoch
  };
  data_parallel<sync_average, cpu> first{model, sgd{0.1f, 0.9f}};
  const auto r = first.fit(data, o);
  CHECK(r.stopped_early);
  CHECK_FALSE(r.stopped);
  CHECK(r.steps == 16);
  CHECK(seen == std::vector<std::size_t>{0, 1});
  CHECK(r.history.size() == 2);
  // The checkpoint holds the stop; a fit without the callback goes on from it to the end.
  o.on_epoch = nullptr;
  data_parallel<sync_average, cpu> second{model, sgd{0.1f, 0.9f}};
  const auto r2 = second.fit(data, o);
  CHECK(r2.resumed_from == 16);
  CHECK(r2.steps == 32);
  CHECK_FALSE(r2.stopped_early);
  // Asked to stop at the last step: the run is whole, not stopped early.
  o.checkpoint_path.clear();
  o.on_epoch = [](const epoch_summary& e) { return e.epoch < 3; };
  data_parallel<sync_average, cpu> last{model, sgd{0.1f, 0.9f}};
  const auto rl = last.fit(data, o);
  CHECK(rl.steps == 32);
  CHECK_FALSE(rl.stopped_early);
  // mean_loss from on_epoch (the fit's own thread, between two steps) equals the summary's.
  o.on_epoch = [&](const epoch_summary& e) {
    CHECK(last.mean_loss(val) == e.validation_loss);
    return true;
  };
  (void)last.fit(data, o);
  CHECK(second.parameters() == whole.parameters());
  std::remove(path.c_str());
  // A callback that throws: its exception reaches the caller.
  o.checkpoint_path.clear();
  o.on_epoch = [](const epoch_summary&) -> bool { throw std::runtime_error("on_epoch failed"); };
  data_parallel<sync_average, cpu> third{model, sgd{0.1f, 0.9f}};
  CHECK(error_of([&] { (void)third.fit(data, o); }) == "on_epoch failed");
}

TEST_CASE("validation and on_epoch: refused for policies whose replicas differ, and bad validation sets",
          "[train][checkpoint][adversary]") {
  const auto data = synthetic(256, 3), val = synthetic(100, 4);
  const softmax_regression<float> model(16, 4);
  auto o = quiet(1, 32);
  o.validation = &val;
  data_parallel<hogwild, cpu> h{model, sgd{0.1f}};
  const auto before = h.parameters();
  CHECK(error_of([&] { (void)h.fit(data, o); }).find("locus: fit: hogwild's replicas do not hold the same parameters") !=
        std::string::npos);
  CHECK(h.parameters() == before);
  auto only_callback = quiet(1, 32);
  only_callback.on_epoch = [](const epoch_summary&) { return true; };
  data_parallel<local_sgd, cpu> l{model, sgd{0.1f}};
  CHECK(error_of([&] { (void)l.fit(data, only_callback); }).find("local_sgd's replicas do not hold") != std::string::npos);
  data_parallel<sync_average, cpu> s{model, sgd{0.1f}};
  const data::dataset empty{};
  o.validation = &empty;
  CHECK(error_of([&] { (void)s.fit(data, o); }) == "locus: fit: the validation set is empty");
  const auto targets = data::make_dataset(std::vector<float>(32, 0.5f), 16, std::vector<float>{1.f, 2.f}, 1);
  o.validation = &targets;
  CHECK(error_of([&] { (void)s.fit(data, o); })
            .find("locus: fit: validation: the model is a classifier (int32 labels) and the data set has float "
                  "targets") != std::string::npos);
  auto wide = synthetic(10, 5);
  wide.labels = tensor<std::int32_t, cpu>(std::vector<std::int32_t>(10, 7));
  o.validation = &wide;
  CHECK(error_of([&] { (void)s.fit(data, o); }).find("label 0 is 7, outside the model's classes [0, 4)") !=
        std::string::npos);
  // A model whose loss_and_grad draws a random stream and has no loss(p, x, y) cannot be evaluated:
  // refused before the first step, and by mean_loss.
  data_parallel<sync_average, cpu> drawing{streaming(16, 4), sgd{0.1f}};
  o.validation = &val;
  CHECK(error_of([&] { (void)drawing.fit(data, o); }) ==
        "locus: fit: validation: the model's loss_and_grad takes a random stream (dropout) and the model has no "
        "loss(p, x, y) for evaluation mode");
  CHECK(drawing.parameters() == s.parameters());
  CHECK(error_of([&] { (void)drawing.mean_loss(val); }).find("locus: mean_loss: the model's loss_and_grad takes") == 0);
  const auto narrow = data::make_dataset(std::vector<float>(30, 0.5f), 15, std::vector<std::int32_t>{1, 2}, 4);
  o.validation = &narrow;
  CHECK(error_of([&] { (void)s.fit(data, o); }) == "locus: fit: validation rows of 15 features, the data's of 16");
  CHECK(s.parameters() == data_parallel<sync_average, cpu>{model, sgd{0.1f}}.parameters());
}

TEST_CASE("the epoch line names a validation loss that is NaN, and leaves out what was not measured",
          "[train][checkpoint]") {
  epoch_summary e;
  e.epoch = 1;
  e.step = 20;
  e.loss = 0.5;
  CHECK(train::detail::epoch_line(e, false, true) == "epoch 2 (step 20): loss = 0.5000");
  CHECK(train::detail::epoch_line(e, true, true) == "epoch 2 (step 20): loss = 0.5000; validation loss = nan, accuracy = nan");
  e.validation_loss = 0.25;
  CHECK(train::detail::epoch_line(e, true, false) == "epoch 2 (step 20): loss = 0.5000; validation loss = 0.2500");
}
