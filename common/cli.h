// Command lines: every tencache program (tencache-launch, -worker, -sim, -bench)
// parses its flags with CLI11 through these two functions, so that all of them
// accept `--flag value` and `--flag=value`, answer `--help` on every subcommand
// and `-v`/`--version`, and turn a parse error into one message on stderr and exit 2.
// The validators below give every program the same messages for sizes, counts
// and choices. Header-only; not thread-safe (used once at startup).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/byte_size.h"
#include "common/suggest.h"

#ifndef TENCACHE_VERSION
#define TENCACHE_VERSION "unknown"
#endif

namespace tencache {

inline const char* TencacheVersion() { return TENCACHE_VERSION; }

// An app named `program` with `-v,--version` ("tencache-sim 0.1.0"), help on
// every subcommand, and the last of a repeated single-value flag winning.
inline std::unique_ptr<CLI::App> MakeCliApp(const std::string& program, const std::string& description) {
  auto app = std::make_unique<CLI::App>(description, program);
  app->set_version_flag("-v,--version", program + " " + TencacheVersion());
  app->option_defaults()->always_capture_default();
  // A flag given twice: the last wins (lists such as --set gather every one).
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return app;
}

// " (did you mean '--json'?)" for the first unknown flag that CLI11's
// ExtrasError `message` names, from the options of the subcommand being parsed;
// "" when none is close.
inline std::string SuggestFlag(const CLI::App& app, const std::string& message) {
  const CLI::App* cur = &app;
  while (!cur->get_subcommands().empty()) cur = cur->get_subcommands().front();
  std::vector<std::string> names;
  for (const CLI::App* a = cur; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
      for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
    }
  }
  const size_t colon = message.find(": ");
  std::string rest = colon == std::string::npos ? "" : message.substr(colon + 2);
  size_t at = 0;
  while (at < rest.size()) {
    size_t end = rest.find(' ', at);
    if (end == std::string::npos) end = rest.size();
    const std::string word = rest.substr(at, end - at);
    if (word.size() > 1 && word[0] == '-') return DidYouMean(word.substr(0, word.find('=')), names);
    at = end + 1;
  }
  return "";
}

// Parses argv into `app`. Returns -1 when the program should go on; otherwise
// the exit code to return: 0 after printing help or the version, 2 after
// printing a parse error ("tencache-sim: --steps: ...; see --help").
inline int ParseCli(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    std::fprintf(stderr, "%s: %s%s; see %s --help\n", app.get_name().c_str(), e.what(),
                 SuggestFlag(app, e.what()).c_str(), app.get_name().c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s; see %s --help\n", app.get_name().c_str(), e.what(), app.get_name().c_str());
    return 2;
  }
  return -1;
}

// As ParseCli, over `args` (without the program name), printing the help or the
// version to `out` and the error to `err`: for programs driven from tests.
inline int ParseCli(CLI::App& app, std::vector<std::string> args, std::ostream& out, std::ostream& err) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e, out, err);
  } catch (const CLI::ExtrasError& e) {
    err << app.get_name() << ": " << e.what() << SuggestFlag(app, e.what()) << "; see " << app.get_name() << " --help\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    err << app.get_name() << ": " << e.what() << "; see " << app.get_name() << " --help\n";
    return 2;
  }
  return -1;
}

// A validator that accepts a value when `accepts(value)`, and otherwise fails
// with "got 'VALUE', expected <expected>" (CLI11 puts the flag in front).
inline CLI::Validator CliCheck(const std::string& expected, std::function<bool(const std::string&)> accepts) {
  return CLI::Validator(
      [expected, accepts](std::string& v) {
        return accepts(v) ? std::string() : "got '" + v + "', expected " + expected;
      },
      "");
}

// A whole number from `min` to `max`, written plainly or in exponent form as
// job files take them ("1e3"); as a transform it rewrites the text as digits
// for an integer option ("got '0', expected a whole number from 1 to 4096").
inline CLI::Validator CliWholeNumber(long long min, long long max) {
  const std::string expected = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, expected](std::string& v) -> std::string {
        char* end = nullptr;
        const double d = v.empty() ? 0.0 : std::strtod(v.c_str(), &end);
        const bool whole = !v.empty() && end == v.c_str() + v.size() && std::isfinite(d) && d == std::floor(d);
        if (!whole || d < double(min) || d > double(max)) return "got '" + v + "', expected " + expected;
        v = std::to_string((long long)d);
        return "";
      },
      "");
}

// One of `choices` ("got 'int8', expected bf16, fp16 or fp32").
inline CLI::Validator CliOneOf(const std::vector<std::string>& choices) {
  std::string expected;
  for (size_t i = 0; i < choices.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return CliCheck(expected, [choices](const std::string& v) {
    return std::find(choices.begin(), choices.end(), v) != choices.end();
  });
}

// A byte size ("24GiB", "1.5TB"; common/byte_size.h) of at least `min_bytes`.
// As a transform it turns the text into the byte count, for an option bound to
// an integer; as a check it only validates.
inline CLI::Validator CliByteSize(uint64_t min_bytes = 1) {
  return CLI::Validator(
      [min_bytes](std::string& v) -> std::string {
        StatusOr<uint64_t> bytes = ParseByteSize(v);
        if (!bytes.ok()) return bytes.status().message();
        if (*bytes < min_bytes) {
          return "got '" + v + "', expected a size of " +
                 (min_bytes == 1 ? "more than 0" : "at least " + FormatBytes(min_bytes));
        }
        v = std::to_string(*bytes);
        return "";
      },
      "");
}

// A size as people write it on a command line: "40MiB", "1GiB"; FormatBytes
// ("1.50 GiB") when no binary unit divides it.
inline std::string CliSizeText(uint64_t bytes) {
  const std::pair<uint64_t, const char*> units[] = {{kTiB, "TiB"}, {kGiB, "GiB"}, {kMiB, "MiB"}, {kKiB, "KiB"}};
  for (const auto& [unit, name] : units) {
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + name;
  }
  return FormatBytes(bytes);
}

// Adds `name SIZE` bound to *bytes; the help shows a nonzero default as a size.
inline CLI::Option* AddSizeOption(CLI::App& app, const std::string& name, uint64_t* bytes,
                                  const std::string& help, uint64_t min_bytes = 1) {
  CLI::Option* opt = app.add_option(name, *bytes, help)->transform(CliByteSize(min_bytes))->type_name("SIZE");
  return opt->default_str(*bytes != 0 ? CliSizeText(*bytes) : "");
}

}  // namespace tencache
