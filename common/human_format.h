// Numbers in the units people read, for reports and tables: dollars, durations,
// rates, percentages (bytes: FormatBytes in common/byte_size.h). Never exponent
// form; a value that rounds up to the next unit is printed in that unit
// ("1.00 s", not "1000 ms"). Negative values get a leading '-'; NaN and
// infinities print as "n/a". Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace tencache {

// "$2,572" (>= $1,000: whole dollars, thousands separated), "$316.98" and
// "$0.03" (cents), "$0.0041" (below a cent: two significant digits), "$0".
std::string FormatUsd(double usd);

// "450 us" (< 1 ms), "4.5 ms", "45 ms", "1.24 s", "12.3 s", "3 min 5 s",
// "2 h 10 min", "3.2 days" (>= 24 h; "120 days" from 100 days), "0 s".
std::string FormatDuration(double seconds);

// Three significant digits with K, M, G, T (powers of 1000) and the unit after
// a space: FormatRate(12345, "tok/s") = "12.3K tok/s", "1.20M tok/s",
// "950 tok/s", "0.50 tok/s". An empty unit gives the bare number ("12.3K").
std::string FormatRate(double value, const std::string& unit);

// A fraction as a percentage with one decimal: 0.053 -> "5.3 %".
std::string FormatPercent(double fraction);

// The same with a sign, for errors: 0.053 -> "+5.3 %", -0.12 -> "-12.0 %";
// anything that rounds to zero is "0.0 %".
std::string FormatSignedPercent(double fraction);

// `text` as a message quotes it, on one line: its first `max` bytes (never half
// a UTF-8 character) and its length when longer (paths: max 512); a line break
// or tab written \n, \r, \t, and every other byte that is neither printable
// ASCII nor part of well-formed UTF-8 written \xNN, so that no input can put
// control bytes or pages of text on a terminal.
std::string Excerpt(const std::string& text, size_t max = 64);

// Rows as text: columns padded to their widest cell, two spaces apart, no
// trailing spaces, one line per row.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace tencache
