#pragma once
// What every training policy takes and returns: the options of one fit (those that do not belong
// to a policy: a policy carries its own, see policy.hpp), its progress entries and its result.
#include <locus/config.hpp>
#include <locus/errors.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace locus::data {
struct labelled_images;
}

namespace locus::train {

struct progress {
  std::size_t step = 0;           ///< global step (batches applied)
  std::size_t epoch = 0;
  double loss = 0;                ///< the loss of the batch just applied
  double examples_per_sec = 0;    ///< since the previous line
  double sec_per_batch = 0;
  double wall_seconds = 0;        ///< since fit() started
  /// The L2 norm of the step's averaged gradient over every parameter, replica and rank, before
  /// clipping (with fit_options::clip_norm > 0; otherwise 0).
  double grad_norm = 0;
};

/// The end of an epoch (or of the fit, at its last step): fit_result::history and
/// fit_options::on_epoch.
struct epoch_summary {
  std::size_t epoch = 0;   ///< counted from 0, as progress::epoch (the lines print it from 1)
  std::size_t step = 0;    ///< the steps done at its end (resumed ones included)
  double loss = 0;         ///< the mean loss of its steps applied in this fit (NaN: none)
  /// fit_options::validation's mean loss in evaluation mode and, for a classifier, its accuracy
  /// (NaN without a validation set; the accuracy NaN for a model of float targets).
  double validation_loss = std::numeric_limits<double>::quiet_NaN();
  double validation_accuracy = std::numeric_limits<double>::quiet_NaN();
};

/// The one-line progress bar on standard error: always, never, or when standard error is a terminal.
enum class progress_bar { off, on, automatic };

/// What fit does with a step whose loss or gradient is not finite (NaN or infinite).
enum class non_finite {
  throw_error,  ///< throw non_finite_error; the step is not applied
  skip_step,    ///< drop the step (no update) and go on; counted in fit_result::skipped
  stop,         ///< stop fit without applying it (the last checkpoint on disk stays the last good one)
};

/// A non-finite loss or gradient under non_finite::throw_error.
class non_finite_error : public error {
public:
  using error::error;
};

/// The learning rate over a run after the warmup (see fit_options::schedule).
enum class lr_schedule {
  constant,
  cosine,  ///< from the optimiser's rate down to 0 at the last step of the run
};

struct fit_options {
  std::size_t epochs = 1;
  std::size_t batch = 256;        ///< the global batch (split over the replicas by the synchronous policies)
  /// GPU replicas keep the training set in their memory for the fit when it takes at most this
  /// many bytes (rows, labels and targets): uploaded once, each epoch's order once, every batch
  /// gathered by kernels on the GPU (data::resident). A larger set, or 0 here: each batch is
  /// gathered on the host and copied. Host-run devices read the host's rows either way.
  std::size_t data_on_device_limit = std::size_t(4) << 30;
  std::uint64_t seed = 0;         ///< data order
  std::size_t max_steps = 0;      ///< stop after this many steps (0: all epochs)
  /// The learning rate ramps up linearly over these first steps; unset: the policy's default
  /// (policy::warmup_steps, else 0).
  std::optional<std::size_t> warmup_steps;
  /// After the warmup; unset: the policy's default (policy::schedule, else constant). The cosine
  /// takes the noise out of the last iterates: hogwild's stale steps need it most.
  std::optional<lr_schedule> schedule;
  std::size_t log_every = 100;    ///< a TF-style line every this many steps (0: none)
  progress_bar bar = progress_bar::automatic;
  non_finite on_non_finite = non_finite::throw_error;
  /// Global-norm gradient clipping (policies that declare `clips_gradients`: sync_average): when
  /// > 0, each step's averaged gradient g becomes g * min(1, clip_norm / |g|), |g| its L2 norm over
  /// every parameter, replica and rank (reported as progress::grad_norm and in the lines). 0: off.
  float clip_norm = 0;
  /// Checkpoints (policies with checkpoints::during_fit): when `checkpoint_path` names an existing
  /// checkpoint, fit resumes from it (its parameters, momentum and step count; the seed must match)
  /// and skips the steps done; a checkpoint is written every `checkpoint_every` steps (0: only at
  /// the end of fit).
  std::string checkpoint_path;
  std::size_t checkpoint_every = 0;
  /// Called after every step applied (or skipped), with its progress entry.
  std::function<void(const progress&)> on_step;
  /// Evaluated at the end of every epoch (and at the fit's last step): its mean loss and, for a
  /// classifier, accuracy, in epoch_summary, fit_result::history and an "epoch N: ..." line. Not
  /// copied: it must outlive the fit. Policies whose replicas agree after every step
  /// (`checkpoints`: sync_average).
  const data::labelled_images* validation = nullptr;
  /// Called at the end of every epoch (and at the fit's last step) with its summary; returning
  /// false stops the fit there (fit_result::stopped_early; the checkpoint is written as at the
  /// end). Across MPI ranks every rank's is called and rank 0's answer decides. Policies as for
  /// validation.
  std::function<bool(const epoch_summary&)> on_epoch;
  /// Across processes (an MPI communicator): rank 0 alone prints its progress lines and draws the
  /// bar, unless this is set (every rank's curve and on_step are kept and called either way).
  bool print_on_every_rank = false;
  /// Where the progress lines go (stdout by default; nullptr: nowhere).
  std::function<void(const std::string&)> print = [](const std::string& line) {
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  };
};

struct fit_result {
  std::vector<progress> curve;    ///< one entry per step run by this fit (not the resumed ones)
  double seconds = 0;
  std::size_t examples = 0;
  std::size_t resumed_from = 0;   ///< the steps a checkpoint had done already
  std::size_t steps = 0;          ///< the run's steps done (applied or skipped) at the end, resumed ones included
  std::size_t skipped = 0;        ///< steps dropped under non_finite::skip_step
  bool stopped = false;           ///< stopped by non_finite::stop
  bool stopped_early = false;     ///< stopped by on_epoch
  /// One entry per epoch ended in this fit, when fit_options::validation or on_epoch is given.
  std::vector<epoch_summary> history;
  [[nodiscard]] double examples_per_sec() const { return seconds > 0 ? double(examples) / seconds : 0; }
};

/// The steps of a run: whole batches per epoch, times the epochs, capped by max_steps. The product
/// saturates at SIZE_MAX instead of wrapping (2^63 epochs of 2 batches is "train until max_steps",
/// not 0 steps): `epochs = SIZE_MAX` with max_steps trains by steps.
[[nodiscard]] inline std::size_t total_steps(std::size_t examples, const fit_options& o) {
  const std::size_t per_epoch = o.batch == 0 ? 0 : examples / o.batch;
  const std::size_t all = per_epoch != 0 && o.epochs > std::numeric_limits<std::size_t>::max() / per_epoch
                              ? std::numeric_limits<std::size_t>::max()
                              : per_epoch * o.epochs;
  return o.max_steps != 0 ? std::min(o.max_steps, all) : all;
}

}  // namespace locus::train
