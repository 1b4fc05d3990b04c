// Checks every flag value goes through, whatever the command: one place for "a whole number that
// fits", "not empty" and "each item once", instead of code per flag.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace tessel::cli {

// Adds to every option of `app` and of its subcommands (flags without a value aside), ahead of
// the option's own checks:
// - a value may not be empty (CLI11 reads `--train-frac ''` as 0);
// - a whole-number option (CLI11's INT or UINT) takes decimal digits only, with a '-' for INT,
//   and a value beyond its 64 bits is refused (CLI11 clamps 99999999999999999999 to 2^63 - 1,
//   wraps -1 into an unsigned 2^64 - 1 and reads 010 as octal: here it is 10);
// - a floating-point option takes a finite number.
// The error names the flag: "--metis-max-edges: 99999999999999999999 is outside the whole
// numbers this flag holds, [-9223372036854775808, 9223372036854775807]".
void add_common_checks(CLI::App& app);

// Before parsing: refuses a value given to a flag that takes none (`--quiet=yes`,
// `--ogb=1e309`): CLI11 reads such a value as the flag's own. The flags looked at are those of
// the command the words before reach (`tessel convert synthetic ...`) and of the commands above
// it; words after a lone `--` are not looked at. Throws InputError naming the flag:
// "--quiet takes no value (got --quiet=yes): give --quiet alone"; `reached` is then the command
// reached ("tessel train"), for the --help hint.
void refuse_flag_values(const CLI::App& app, int argc, const char* const* argv,
                        std::string& reached);

// After parsing: refuses an option given several values (`--features s1 s1`, or s1,s1) that
// names one twice: "--features: s1 is listed twice in s1 s1". Lists of numbers may repeat one
// (`--edge-split 80,10,10`). Throws InputError.
void check_distinct_values(const CLI::App& app);

// The items of a comma-separated flag value ("nodes,train"): none empty, none twice. Throws
// InputError naming the flag: "--modes: full is listed twice in full,full".
std::vector<std::string> split_list(const std::string& flag, const std::string& text);

// The same as a CLI11 check, for a flag that holds the list as text (--balance): CLI11 prefixes
// the flag, "--balance: nodes is listed twice in nodes,nodes".
CLI::Validator distinct_list();

// Refuses a list (already split) that names an item twice, naming the flag and the item.
void require_distinct(const std::string& flag, const std::string& shown,
                      const std::vector<std::string>& items);

// The fault-injection variables of train and bench (TESSEL_FAULT_RANK, TESSEL_FAULT_EPOCH: whole
// numbers >= 0; TESSEL_FAULT_KIND: kill), when set: `TESSEL_FAULT_RANK=x` was read as rank 0.
// Throws InputError naming the variable.
void check_fault_environment();

}  // namespace tessel::cli
