#pragma once
// locus::ad: reverse-mode differentiation of locus expressions. Write the forward computation over
// ad::var operands (or let ad::grad make them from tensors); see var.hpp for how the backward pass
// runs and grad.hpp for the entry points.
#include <locus/ad/conv.hpp>
#include <locus/ad/dual.hpp>
#include <locus/ad/grad.hpp>
#include <locus/ad/ops.hpp>
#include <locus/ad/var.hpp>
