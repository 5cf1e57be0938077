// The main job: trains the 784-256-10 MLP on Fashion-MNIST over N devices, synchronously
// (sync_average), asynchronously (hogwild) or with periodic averaging (local_sgd), and shows where
// everything runs. `multi_device_train --help` prints the options. Every policy's defaults are its
// recipe: with no flag but --policy and --devices, 1/5/10 epochs reach 0.80/0.86/0.87 test accuracy
// on 1, 2 and 4 devices (README.md has the table).
// Under `mpirun -np R` (a build with MPI) the same command trains across the R ranks, each with
// its N devices: mpi<sync_average>, mpi<hogwild> or mpi<local_sgd>; rank 0 alone prints and writes
// files. --policy both trains with sync_average and hogwild in turn (the same model, data and
// devices) and --plot draws their loss curves against step and wall time.
// Devices are gpu<0>..gpu<N-1>: real GPUs in a CUDA build (logical ones where the machine has
// fewer), emulated GPUs otherwise.
#include <locus/locus.hpp>
#include <locus/train/data_parallel.hpp>
#include <locus/train/mlp.hpp>
#include <locus/train/softmax_regression.hpp>

#include "loss_plot.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <variant>
#include <vector>
#include <string>
#include <string_view>

using namespace locus;
using namespace locus::train;

namespace {

constexpr const char* usage_text =
    "usage: multi_device_train [options]\n"
    "  --policy sync|hogwild|local|both   sync_average (default), hogwild, local_sgd, or sync then hogwild\n"
    "  --devices N                        N from 1 to 4: gpu<0>..gpu<N-1> (default 2; a build without GPUs: 1, the cpu)\n"
    "  --epochs E --batch B --seed K      (default 1 epoch, batch 256, seed 0)\n"
    "  --max-steps S                      stop after S steps\n"
    "  --lr X --momentum M                SGD with momentum (default 0.1, 0.9)\n"
    "  --optimizer sgd|nesterov|adam|adamw   (default sgd; adam and adamw: lr 1e-3 unless --lr)\n"
    "  --weight-decay W                   adam (L2, default 0) and adamw (decoupled, default 0.01)\n"
    "  --hogwild-lr X                     hogwild's rate when it differs from --lr\n"
    "  --warmup S --schedule constant|cosine   (default: the policy's recipe; hogwild: cosine after 20)\n"
    "  --staleness on|off --lookahead on|off --writes atomic_add|load_store   hogwild's options\n"
    "  --accumulate K                     sync_average: micro-batches per update\n"
    "  --period H                         local_sgd: local steps between averages (default 4)\n"
    "  --data DIR --csv FILE --plot FILE.png|FILE.svg --progress --log-device-placement\n"
    "  --expect-accuracy A                exit 1 below it\n"
    "  --help                             this text\n";

struct args {
  std::string policy = "sync";
  int devices = 2;
  fit_options fit;
  sgd opt{0.1f, 0.9f};
  std::string optimizer = "sgd";
  bool lr_given = false;
  std::optional<float> weight_decay;
  std::variant<sgd, adam, adamw> chosen;  // from the three above, after parsing
  float hogwild_lr = 0;  // 0: --lr
  hogwild hog;
  sync_average sync;
  local_sgd local;
  std::uint64_t seed = 0;
  std::string data_dir, csv, plot;
  bool log_placement = false;
  double expect_accuracy = 0;  // exit 1 below it (the example's test)
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "multi_device_train: %s\n%s", why.c_str(), usage_text);
  std::exit(2);
}

bool on_off(const std::string& k, const std::string& v) {
  if (v != "on" && v != "off") usage(k + " is on or off");
  return v == "on";
}

std::size_t count(const std::string& k, const std::string& v) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || v[0] == '-') usage(k + " takes a whole number, not '" + v + "'");
  return std::size_t(n);
}

float real(const std::string& k, const std::string& v) {
  char* end = nullptr;
  const float x = std::strtof(v.c_str(), &end);
  if (v.empty() || *end != '\0') usage(k + " takes a number, not '" + v + "'");
  return x;
}

args parse(int argc, char** argv) {
  args a;
  a.fit.epochs = 1;
  a.fit.batch = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value for " + k);
      return argv[++i];
    };
    if (k == "--help" || k == "-h") {
      std::fputs(usage_text, stdout);
      std::exit(0);
    }
    else if (k == "--policy") a.policy = value();
    else if (k == "--devices") a.devices = int(count(k, value()));
    else if (k == "--epochs") a.fit.epochs = count(k, value());
    else if (k == "--batch") a.fit.batch = count(k, value());
    else if (k == "--lr") {
      a.opt.lr = real(k, value());
      a.lr_given = true;
    }
    else if (k == "--optimizer") a.optimizer = value();
    else if (k == "--weight-decay") a.weight_decay = real(k, value());
    else if (k == "--hogwild-lr") a.hogwild_lr = real(k, value());
    else if (k == "--plot") a.plot = value();
    else if (k == "--progress") a.fit.bar = progress_bar::on;
    else if (k == "--momentum") a.opt.momentum = real(k, value());
    else if (k == "--warmup") a.fit.warmup_steps = count(k, value());
    else if (k == "--staleness") a.hog.scale_by_staleness = on_off(k, value());
    else if (k == "--lookahead") a.hog.lookahead = on_off(k, value());
    else if (k == "--accumulate") a.sync.accumulate = count(k, value());
    else if (k == "--period") a.local.period = count(k, value());
    else if (k == "--writes") {
      const auto v = value();
      if (v != "atomic_add" && v != "load_store") usage("--writes is atomic_add or load_store");
      a.hog.writes = v == "load_store" ? hogwild_writes::load_store : hogwild_writes::atomic_add;
    }
    else if (k == "--schedule") {
      const auto v = value();
      if (v != "constant" && v != "cosine") usage("--schedule is constant or cosine");
      a.fit.schedule = v == "cosine" ? lr_schedule::cosine : lr_schedule::constant;
    }
    else if (k == "--max-steps") a.fit.max_steps = count(k, value());
    else if (k == "--seed") a.seed = count(k, value());
    else if (k == "--data") a.data_dir = value();
    else if (k == "--csv") a.csv = value();
    else if (k == "--log-device-placement") a.log_placement = true;
    else if (k == "--expect-accuracy") a.expect_accuracy = real(k, value());
    else usage("unknown option " + k);
  }
  if (a.policy != "sync" && a.policy != "hogwild" && a.policy != "local" && a.policy != "both")
    usage("--policy is sync, hogwild, local or both");
  if (a.devices < 1 || a.devices > 4) usage("--devices is 1 to 4");
  const auto adam_like = [&](auto o) {
    if (a.lr_given) o.lr = a.opt.lr;
    if (a.weight_decay) o.weight_decay = *a.weight_decay;
    return o;
  };
  if (a.optimizer == "sgd" || a.optimizer == "nesterov") {
    if (a.weight_decay) usage("--weight-decay is for adam and adamw");
    a.opt.nesterov = a.optimizer == "nesterov";
    a.chosen = a.opt;
  } else if (a.optimizer == "adam") {
    a.chosen = adam_like(adam{});
  } else if (a.optimizer == "adamw") {
    a.chosen = adam_like(adamw{});
  } else {
    usage("--optimizer is sgd, nesterov, adam or adamw");
  }
  a.fit.seed = a.seed;
  return a;
}

struct outcome {
  example::curve curve;
  double accuracy = 0;
};

/// "sync_average", or "mpi<sync_average>" across ranks.
template <class P>
std::string policy_name() {
  if constexpr (std::is_same_v<typename P::communicator, dist::mpi>) return std::string("mpi<") + P::name + ">";
  else return P::name;
}

/// The policy object with the options given on the command line (the rest: its defaults).
template <class P>
P policy_from(const args& a) {
  P p{};
  if constexpr (requires { p.lookahead; }) {
    p.lookahead = a.hog.lookahead;
    p.scale_by_staleness = a.hog.scale_by_staleness;
    p.writes = a.hog.writes;
  } else if constexpr (requires { p.accumulate; }) {
    p.accumulate = a.sync.accumulate;
  } else if constexpr (requires { p.period; }) {
    p.period = a.local.period;
  }
  return p;
}

template <class Policy, class... Ds>
outcome run(const args& a, const data::labelled_images& train, const data::labelled_images& test) {
  mlp<float> model({784, 256, 10}, a.seed + 1);
  const std::string name = policy_name<Policy>();
  // The trainer's type names the policy and the devices only: any optimiser goes in. Its type is
  // known inside the visit alone, which makes the trainer and nothing else (the rest is compiled
  // once per policy and device list, not once per optimiser as well).
  using trainer_type = data_parallel<Policy, Ds...>;
  const auto make = [&] {
    return std::visit([&](auto opt) {
      if (std::string_view(Policy::name) == "hogwild" && a.hogwild_lr > 0) opt.lr = a.hogwild_lr;
      return std::make_unique<trainer_type>(model, opt, policy_from<Policy>(a));
    }, a.chosen);
  };
  const auto trainer = make();
  std::printf("policy %s on", name.c_str());
  ((std::printf(" %s", id_of<Ds>.full_name().c_str())), ...);
  std::printf("%s", LOCUS_EMULATE_GPUS ? " (emulated)" : "");
  if (trainer->ranks() > 1) std::printf(", on each of %d ranks", trainer->ranks());
  std::printf(", communicator %s\n", trainer->communicator_name().c_str());
  const auto& opt = trainer->replicas().optimizer();
  std::printf("optimiser %s, lr %g\n", opt.name.c_str(), double(opt.lr));
  if (a.log_placement) {
    // One step with the placement log on: where every operation of a training step runs. Then a
    // fresh trainer, so that the run below starts from the initial parameters.
    std::printf("placement of one training step:\n");
    {
      scoped_placement_log log;
      auto once = a.fit;
      once.max_steps = 1;
      once.epochs = 1;
      once.log_every = 0;
      once.bar = progress_bar::off;
      make()->fit(train, once);
    }
  }
  const auto result = trainer->fit(train, a.fit);
  outcome out{{name + ", " + std::to_string(trainer->replica_count()) + " devices", result.curve}, trainer->accuracy(test)};
  std::printf("trained %zu steps in %.2f s: %.0f examples/sec on %zu device%s\n", result.curve.size(), result.seconds,
              result.examples_per_sec(), trainer->replica_count(), trainer->replica_count() == 1 ? "" : "s");
  std::printf("test accuracy %.4f\n", out.accuracy);
  return out;
}

template <class Policy>
outcome on_devices(const args& a, const data::labelled_images& train, const data::labelled_images& test) {
#if LOCUS_HAS_GPUS
  if (gpu_count() < a.devices) configure_logical_gpus(a.devices);
  // gpu<0>..gpu<N-1> for a run-time N: devices are types, with_devices bridges the two.
  return with_devices<4>(a.devices, [&]<device... Ds>() { return run<Policy, Ds...>(a, train, test); });
#else
  if (a.devices != 1) usage("this build has only the cpu: --devices 1");
  return run<Policy, cpu>(a, train, test);
#endif
}

/// In process, or across the ranks of the MPI job when started by mpirun with more than one.
template <class Policy>
outcome train_with(const args& a, bool across_ranks, const data::labelled_images& train,
                 const data::labelled_images& test) {
#if LOCUS_HAS_MPI
  if (across_ranks) return on_devices<mpi<Policy>>(a, train, test);
#else
  (void)across_ranks;
#endif
  return on_devices<Policy>(a, train, test);
}

void write_csv(const std::string& path, const std::vector<outcome>& runs) {
  std::ofstream out(path);
  out << "step,epoch,wall_seconds,loss,run\n";
  for (const auto& r : runs)
    for (const auto& p : r.curve.points)
      out << p.step << ',' << p.epoch << ',' << p.wall_seconds << ',' << p.loss << ",\"" << r.curve.label << "\"\n";
  if (!out) throw std::runtime_error("cannot write " + path);
  std::printf("loss curve written to %s\n", path.c_str());
}

}  // namespace

/// Started by mpirun (OpenMPI, or a PMI launcher): the only case in which MPI is initialised.
[[maybe_unused]] bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

int main(int argc, char** argv) {
  args a = parse(argc, argv);
  bool across_ranks = false;
#if LOCUS_HAS_MPI
  std::optional<mpi_session> session;
  if (launched_by_mpirun()) session.emplace(argc, argv);
  across_ranks = session && session->size() > 1;
  if (session && session->rank() != 0) {
    // Rank 0 alone prints and writes files.
    if (std::freopen("/dev/null", "w", stdout) == nullptr) return 1;
    a.fit.bar = progress_bar::off;
    a.csv.clear();
    a.plot.clear();
  }
#endif
  try {
    const auto t0 = std::chrono::steady_clock::now();
    const auto train = data::fashion_mnist::load_train(a.data_dir);
    const auto test = data::fashion_mnist::load_test(a.data_dir);
    std::printf("Fashion-MNIST: %zu training and %zu test images from %s (%.2f s)\n", train.size(), test.size(),
                data::fashion_mnist::directory(a.data_dir).c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::printf("available devices:");
    for (const auto& d : available_devices()) std::printf(" %s", d.c_str());
    std::printf("\n");
    const auto host = backend::host_parallelism_info();
    std::printf("host kernels: %d thread%s (%s), serial below %zu elements\n", host.threads,
                host.threads == 1 ? "" : "s", host.source.c_str(), host.grain);
    std::vector<outcome> runs;
    if (a.policy == "sync" || a.policy == "both") runs.push_back(train_with<sync_average>(a, across_ranks, train, test));
    if (a.policy == "hogwild" || a.policy == "both") runs.push_back(train_with<hogwild>(a, across_ranks, train, test));
    if (a.policy == "local") runs.push_back(train_with<local_sgd>(a, across_ranks, train, test));
    if (!a.csv.empty()) write_csv(a.csv, runs);
    if (!a.plot.empty()) {
      std::vector<example::curve> curves;
      for (const auto& r : runs) curves.push_back(r.curve);
      std::printf("loss plot written to %s\n", example::write_plot(a.plot, curves).c_str());
    }
    int status = 0;
    for (const auto& r : runs)
      if (r.accuracy < a.expect_accuracy) {
        std::printf("FAILED: %s: test accuracy %.4f is below the expected %.4f\n", r.curve.label.c_str(), r.accuracy,
                    a.expect_accuracy);
        status = 1;
      }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "multi_device_train: %s\n", e.what());
#if LOCUS_HAS_MPI
    // The other ranks may wait for this one at a collective: end the job.
    if (across_ranks) {
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
#endif
    return 1;
  }
}
