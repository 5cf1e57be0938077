#pragma once
// What the training policies train: the model concept, and a model's replica on one device behind
// a small virtual interface (so data_parallel<Policy, Devices...> names devices, not the model).
//
// A model M (bring your own; softmax_regression.hpp is a complete small one):
//   typename M::value_type            float: the policies train float models
//   typename M::template params<D>    its parameters on device D, any type with
//       p.for_each(f)                 f(view) for every parameter tensor, always in the same order:
//                                     tensor_view<float, D, R> from a mutable p, tensor_view<const
//                                     float, D, R> from a const one
//   m.template init<D>()              -> params<D> from the model's initialiser
//   m.loss_and_grad(p, x, y)          -> s with s.loss (tensor<float, D, 0>: the batch's mean loss)
//                                     and s.grad (params<D>: the gradient of s.loss)
//   m.predict(p, x)                   -> tensor<std::int64_t, D>: the class of each row
// where x is a tensor<float, D, 2> (a batch, one example per row) and y a tensor<std::int32_t, D>
// (their labels). The policies see the parameters as one flat vector, the concatenation of the
// tensors in for_each order: that is what is averaged, updated, copied between devices and saved.
#include <locus/config.hpp>
#include <locus/device/device.hpp>
#include <locus/errors.hpp>
#include <locus/tensor/tensor.hpp>
#include <locus/tensor/transfer.hpp>
#include <locus/train/layout.hpp>

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace locus::train {

namespace detail {
/// Stands for the callable a policy passes to for_each (any view).
struct any_view_sink {
  template <class V>
  void operator()(const V&) const {}
};
}  // namespace detail

/// A model's parameters on one device: for_each visits every tensor, mutably or not.
template <class P>
concept parameter_set = requires(P& p, const P& cp, detail::any_view_sink f) {
  p.for_each(f);
  cp.for_each(f);
};

/// M can be trained on device D by the policies of data_parallel (see the list at the top).
template <class M, class D>
concept model_on =
    device<D> && std::same_as<typename M::value_type, float> && parameter_set<typename M::template params<D>> &&
    requires(const M& m, const typename M::template params<D>& p, const tensor<float, D, 2>& x,
             const tensor<std::int32_t, D>& y) {
      { m.template init<D>() } -> std::same_as<typename M::template params<D>>;
      { m.loss_and_grad(p, x, y).loss.item() } -> std::convertible_to<double>;
      { m.loss_and_grad(p, x, y).grad } -> std::convertible_to<const typename M::template params<D>&>;
      { m.predict(p, x) } -> std::same_as<tensor<std::int64_t, D>>;
    };

/// A model's parameters on device D, seen by the policies: rank-1 views of every parameter tensor
/// (stable for the replica's lifetime), and the loss-and-gradient step, whose gradient tensors are
/// kept (views in the same order) until the next step.
template <device D>
class replica {
public:
  using device_type = D;
  virtual ~replica() = default;
  replica() = default;
  replica(const replica&) = delete;
  replica& operator=(const replica&) = delete;

  [[nodiscard]] const std::vector<tensor_view<float, D, 1>>& parameters() const noexcept { return views_; }
  /// The extents of every parameter tensor (the views above are flat).
  [[nodiscard]] const std::vector<std::vector<std::uint64_t>>& shapes() const noexcept { return shapes_; }
  /// The number of parameters (all tensors together).
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The mean loss on (x, y); its gradient is kept, see gradients().
  virtual double loss_and_grad(const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y) = 0;
  /// The gradient of the last loss_and_grad, one view per parameter tensor.
  [[nodiscard]] const std::vector<tensor_view<const float, D, 1>>& gradients() const noexcept { return grads_; }
  /// Copies the last gradient into one flat buffer of size() elements (what is averaged or sent).
  void pack_gradients(const tensor_view<float, D, 1>& flat) const {
    if (flat.size() != size_ || grads_.size() != views_.size())
      throw shape_error("locus: replica<" + id_of<D>.type_name() + ">: a gradient buffer of " +
                        std::to_string(flat.size()) + " elements for " + std::to_string(size_) +
                        " parameters, or no gradient yet");
    pack(grads_, flat);
  }
  [[nodiscard]] virtual tensor<std::int64_t, D> predict(const tensor<float, D, 2>& x) const = 0;

protected:
  std::vector<tensor_view<float, D, 1>> views_;
  std::vector<std::vector<std::uint64_t>> shapes_;
  std::vector<tensor_view<const float, D, 1>> grads_;
  std::size_t size_ = 0;
};

template <class M, device D>
  requires model_on<M, D>
class replica_of final : public replica<D> {
public:
  explicit replica_of(std::shared_ptr<const M> model) : model_(std::move(model)), p_(model_->template init<D>()) {
    p_.for_each([&](const auto& v) {
      this->views_.emplace_back(v.data(), shape{v.size()});
      std::vector<std::uint64_t> extents;
      for (std::size_t d = 0; d < std::size_t(v.shape().rank()); ++d) extents.push_back(v.shape()[d]);
      this->shapes_.push_back(std::move(extents));
      this->size_ += v.size();
    });
  }

  double loss_and_grad(const tensor<float, D, 2>& x, const tensor<std::int32_t, D>& y) override {
    this->grads_.clear();
    auto s = model_->loss_and_grad(std::as_const(p_), x, y);
    const double loss = double(s.loss.item());
    grad_.emplace(std::move(s.grad));
    std::vector<tensor_view<const float, D, 1>> views;
    std::as_const(*grad_).for_each([&](const auto& g) {
      const std::size_t index = views.size();
      if (index >= this->views_.size() || g.size() != this->views_[index].size())
        throw shape_error("locus: the model's gradient tensor " + std::to_string(index) + " has " +
                          std::to_string(g.size()) + " elements; its parameter has " +
                          (index < this->views_.size() ? std::to_string(this->views_[index].size()) : std::string("none")));
      views.emplace_back(g.data(), shape{g.size()});
    });
    if (views.size() != this->views_.size())
      throw shape_error("locus: the model's gradient has " + std::to_string(views.size()) + " tensors for " +
                        std::to_string(this->views_.size()) + " parameters");
    this->grads_ = std::move(views);
    return loss;
  }

  [[nodiscard]] tensor<std::int64_t, D> predict(const tensor<float, D, 2>& x) const override {
    return model_->predict(p_, x);
  }

private:
  std::shared_ptr<const M> model_;
  typename M::template params<D> p_;
  std::optional<typename M::template params<D>> grad_;
};

}  // namespace locus::train
