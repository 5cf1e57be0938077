#pragma once
// Catch2 v2 (Debian 12's 2.13) and v3 behind one include.
#if defined(LOCUS_CATCH2_V3) || \
    (!defined(LOCUS_CATCH2_V2) && defined(__has_include) && __has_include(<catch2/catch_test_macros.hpp>))
#  include <catch2/catch_approx.hpp>
#  include <catch2/catch_template_test_macros.hpp>
#  include <catch2/catch_test_macros.hpp>
#  include <catch2/matchers/catch_matchers_string.hpp>
#else
#  include <catch2/catch.hpp>
#endif
