#include "common/human_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tencache {
namespace {

TEST(FormatUsd, CentsWholeDollarsAndBelowACent) {
  EXPECT_EQ(FormatUsd(2571.6), "$2,572");
  EXPECT_EQ(FormatUsd(1234567.0), "$1,234,567");
  EXPECT_EQ(FormatUsd(1000.0), "$1,000");
  EXPECT_EQ(FormatUsd(999.994), "$999.99");
  EXPECT_EQ(FormatUsd(999.996), "$1,000");  // rounds up into whole dollars
  EXPECT_EQ(FormatUsd(316.98), "$316.98");
  EXPECT_EQ(FormatUsd(1.0), "$1.00");
  EXPECT_EQ(FormatUsd(0.03), "$0.03");
  EXPECT_EQ(FormatUsd(0.01), "$0.01");
  EXPECT_EQ(FormatUsd(0.00996), "$0.01");   // rounds up to a cent
  EXPECT_EQ(FormatUsd(0.0099), "$0.0099");   // below a cent, even above half a cent
  EXPECT_EQ(FormatUsd(0.0052), "$0.0052");
  EXPECT_EQ(FormatUsd(0.0041), "$0.0041");
  EXPECT_EQ(FormatUsd(0.00412), "$0.0041");
  EXPECT_EQ(FormatUsd(0.0000999), "$0.00010");  // two significant digits after rounding up
  EXPECT_EQ(FormatUsd(1.5e-9), "$0.0000000015");
  EXPECT_EQ(FormatUsd(0.0), "$0");
  EXPECT_EQ(FormatUsd(-316.98), "-$316.98");
  EXPECT_EQ(FormatUsd(std::nan("")), "n/a");
}

TEST(FormatUsd, NeverExponentForm) {
  for (double v = 1e-12; v < 1e12; v *= 3.7) {
    const std::string s = FormatUsd(v);
    EXPECT_EQ(s.find('e'), std::string::npos) << v << " -> " << s;
    EXPECT_EQ(s[0], '$') << s;
  }
}

TEST(FormatDuration, EachUnitAndItsBoundaries) {
  EXPECT_EQ(FormatDuration(0), "0 s");
  EXPECT_EQ(FormatDuration(450e-6), "450 us");
  EXPECT_EQ(FormatDuration(0.9996e-3), "1.0 ms");  // rounds up out of microseconds
  EXPECT_EQ(FormatDuration(4.5e-3), "4.5 ms");
  EXPECT_EQ(FormatDuration(9.96e-3), "10 ms");
  EXPECT_EQ(FormatDuration(0.045), "45 ms");
  EXPECT_EQ(FormatDuration(0.9994), "999 ms");
  EXPECT_EQ(FormatDuration(0.9996), "1.00 s");
  EXPECT_EQ(FormatDuration(1.24), "1.24 s");
  EXPECT_EQ(FormatDuration(9.996), "10.0 s");
  EXPECT_EQ(FormatDuration(12.34), "12.3 s");
  EXPECT_EQ(FormatDuration(59.96), "1 min 0 s");
  EXPECT_EQ(FormatDuration(185), "3 min 5 s");
  EXPECT_EQ(FormatDuration(3599.4), "59 min 59 s");
  EXPECT_EQ(FormatDuration(3599.6), "1 h 0 min");
  EXPECT_EQ(FormatDuration(7800), "2 h 10 min");
  EXPECT_EQ(FormatDuration(86369), "23 h 59 min");
  EXPECT_EQ(FormatDuration(86399), "1.0 days");
  EXPECT_EQ(FormatDuration(3.2 * 86400), "3.2 days");
  EXPECT_EQ(FormatDuration(120.4 * 86400), "120 days");
  EXPECT_EQ(FormatDuration(-0.045), "-45 ms");
  EXPECT_EQ(FormatDuration(std::numeric_limits<double>::infinity()), "n/a");
}

TEST(FormatRate, ThreeSignificantDigitsWithSiSuffix) {
  EXPECT_EQ(FormatRate(12345, "tok/s"), "12.3K tok/s");
  EXPECT_EQ(FormatRate(1.2e6, "tok/s"), "1.20M tok/s");
  EXPECT_EQ(FormatRate(950, "tok/s"), "950 tok/s");
  EXPECT_EQ(FormatRate(999.4, "tok/s"), "999 tok/s");
  EXPECT_EQ(FormatRate(999.6, "tok/s"), "1.00K tok/s");  // rounds into the next unit
  EXPECT_EQ(FormatRate(999999, "tok/s"), "1.00M tok/s");
  EXPECT_EQ(FormatRate(9.996, "tok/s"), "10.0 tok/s");
  EXPECT_EQ(FormatRate(0.5, "tok/s"), "0.50 tok/s");
  EXPECT_EQ(FormatRate(0, "tok/s"), "0 tok/s");
  EXPECT_EQ(FormatRate(3.5e9, "B/s"), "3.50G B/s");
  EXPECT_EQ(FormatRate(12345, ""), "12.3K");
  EXPECT_EQ(FormatRate(-12345, "tok/s"), "-12.3K tok/s");
}

TEST(FormatPercent, OneDecimal) {
  EXPECT_EQ(FormatPercent(0.053), "5.3 %");
  EXPECT_EQ(FormatPercent(1.0), "100.0 %");
  EXPECT_EQ(FormatPercent(0.0), "0.0 %");
  EXPECT_EQ(FormatPercent(-0.0001), "0.0 %");  // no "-0.0"
  EXPECT_EQ(FormatPercent(0.9996), "100.0 %");
}

TEST(FormatSignedPercent, SignAlwaysShown) {
  EXPECT_EQ(FormatSignedPercent(0.053), "+5.3 %");
  EXPECT_EQ(FormatSignedPercent(-0.12), "-12.0 %");
  EXPECT_EQ(FormatSignedPercent(0.0625), "+6.2 %");
  EXPECT_EQ(FormatSignedPercent(0.0004), "0.0 %");
  EXPECT_EQ(FormatSignedPercent(-0.0004), "0.0 %");
  EXPECT_EQ(FormatSignedPercent(1.5), "+150.0 %");
}

}  // namespace
}  // namespace tencache
