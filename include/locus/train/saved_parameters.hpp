#pragma once
// A model's parameters alone, in a file, without a trainer (issue 30, part 7):
//
//   auto p = model.init<gpu<1>>();
//   trainer.parameters_into(p);
//   train::save_parameters("model.locus", p);     // the checkpoint format, no optimiser state
//   ...
//   auto q = model.init<cpu>();                     // any device, in another program
//   train::load_parameters("model.locus", q);       // also reads a trainer's checkpoint (save())
//   auto classes = model.predict(q, x);
//
// The file is a checkpoint (train/checkpoint.hpp): the same checks when it is read (magic,
// version, sizes, checksum), and the tensors' shapes in for_each order must be the parameter
// set's, or load_parameters throws checkpoint_error naming both, having written nothing.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>
#include <locus/train/checkpoint.hpp>
#include <locus/train/model.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace locus::train {

namespace detail {
/// Each tensor's extents, in for_each order.
template <parameter_set P>
std::vector<std::vector<std::uint64_t>> shapes_of(const P& p) {
  std::vector<std::vector<std::uint64_t>> shapes;
  p.for_each([&](const auto& v) {
    std::vector<std::uint64_t> s;
    for (int d = 0; d < std::remove_cvref_t<decltype(v)>::rank; ++d) s.push_back(v.shape()[d]);
    shapes.push_back(std::move(s));
  });
  return shapes;
}
}  // namespace detail

/// Writes p's tensors (for_each order) to `path` as a checkpoint without optimiser state, through a
/// temporary file renamed over `path` (a reader never sees half a file). Throws checkpoint_error
/// naming the path when it cannot be written, or when the reader would refuse it (a rank above 8,
/// more than 2^34 values).
template <parameter_set P>
void save_parameters(const std::string& path, const P& p) {
  checkpoint c;
  c.optimizer = "none";
  c.shapes = detail::shapes_of(p);
  p.for_each([&](const auto& v) {
    using V = std::remove_cvref_t<decltype(v)>;
    const std::size_t first = c.parameters.size();
    c.parameters.resize(first + v.size());
    locus::transfer(tensor_view<float, cpu, 1>(c.parameters.data() + first, shape{v.size()}),
                    tensor_view<const float, typename V::device_type, 1>(v.data(), shape{v.size()}));
  });
  c.validate(path);
  c.save(path);
}

/// Reads the parameters in `path` (a save_parameters file or a trainer's checkpoint, whose
/// optimiser state is ignored) into p's tensors, on whatever device they are. Throws
/// checkpoint_error when the file cannot be read or is malformed, or when its shapes are not p's
/// (both named); p is unchanged then.
template <parameter_set P>
void load_parameters(const std::string& path, P& p) {
  const checkpoint c = checkpoint::load(path);
  const auto mine = detail::shapes_of(std::as_const(p));
  if (c.shapes != mine)
    throw checkpoint_error("locus: load_parameters: " + path + " holds tensors " + detail::describe_shapes(c.shapes) +
                           ", the parameter set has " + detail::describe_shapes(mine));
  // A tensor without storage (a default-constructed rank-0 one) has its shape but no element.
  std::size_t index = 0;
  p.for_each([&](const auto& v) {
    std::size_t want = 1;
    for (const auto e : c.shapes[index]) want *= static_cast<std::size_t>(e);
    if (v.size() != want)
      throw checkpoint_error("locus: load_parameters: tensor " + std::to_string(index) + " of the parameter set holds " +
                             std::to_string(v.size()) + " elements, its shape in " + path + " " +
                             std::to_string(want) + " (an empty tensor? make the parameters with the model's init)");
    ++index;
  });
  std::size_t first = 0;
  p.for_each([&](const auto& v) {
    using V = std::remove_cvref_t<decltype(v)>;
    locus::transfer(tensor_view<float, typename V::device_type, 1>(v.data(), shape{v.size()}),
                    tensor_view<const float, cpu, 1>(c.parameters.data() + first, shape{v.size()}));
    first += v.size();
  });
}

}  // namespace locus::train
