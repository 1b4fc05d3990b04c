// The command-line words of an option's enum values: each enum lists its words once, beside its
// definition, as a function `option_words(E)` found by argument-dependent lookup:
//   inline std::span<const OptionWord<Kind>> option_words(Kind) {
//     static constexpr OptionWord<Kind> words[] = {{"a", Kind::a}, {"b", Kind::b}};
//     return words;
//   }
// The command line turns a word into its value once; logs, records and checkpoints print the
// word back with option_word(), and fmt prints such an enum as its word.
#pragma once

#include <concepts>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace tessel {

template <class E> struct OptionWord {
  std::string_view word;
  E value;
};

// An enum whose values have command-line words.
template <class E>
concept HasOptionWords = std::is_enum_v<E> && requires(E e) {
  { option_words(e) } -> std::convertible_to<std::span<const OptionWord<E>>>;
};

// The word of `value` (its number when the enum lists no word for it).
template <class E> std::string option_word(E value) {
  for (const OptionWord<E>& w : option_words(E{}))
    if (w.value == value) return std::string(w.word);
  return std::to_string(static_cast<int>(value));
}

// The accepted words, in the order --help lists them, joined by `separator`.
template <class E> std::string option_word_list(E /*tag*/, std::string_view separator = ", ") {
  std::string listed;
  for (const OptionWord<E>& w : option_words(E{}))
    listed.append(listed.empty() ? "" : separator).append(w.word);
  return listed;
}

// Throws the InputError "'<word>' is not one of <listed>".
[[noreturn]] void fail_option_word(std::string_view word, const std::string& listed);

// The value of a word (for callers that hold words: tests, bindings, files); an InputError
// naming the accepted words otherwise.
template <class E> E option_value(std::string_view word) {
  for (const OptionWord<E>& w : option_words(E{}))
    if (w.word == word) return w.value;
  fail_option_word(word, option_word_list(E{}));
}

} // namespace tessel

// Not for CUDA sources, which include these enums but print nothing (fmt does not compile there).
#if !defined(__CUDACC__)
#include <fmt/format.h>

template <tessel::HasOptionWords E> struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <class FormatContext> auto format(E value, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(tessel::option_word(value), ctx);
  }
};
#endif
