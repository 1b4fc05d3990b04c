// The activity stack behind ScopedActivity.
#include "tessel/core/activity.hpp"

#include <exception>
#include <mutex>
#include <vector>

namespace tessel {

namespace {

struct ActivityStack {
  std::mutex mutex;
  std::vector<std::string> stack;
  std::string failed;
};

ActivityStack& activities() {
  static ActivityStack s;
  return s;
}

std::string describe(const std::vector<std::string>& stack) {
  std::string text;
  for (auto it = stack.rbegin(); it != stack.rend(); ++it)
    text += (text.empty() ? "" : ", in ") + *it;
  return text;
}

}  // namespace

ScopedActivity::ScopedActivity(std::string what) : uncaught_at_start_(std::uncaught_exceptions()) {
  auto& s = activities();
  std::lock_guard lock(s.mutex);
  s.stack.push_back(std::move(what));
}

ScopedActivity::~ScopedActivity() {
  auto& s = activities();
  std::lock_guard lock(s.mutex);
  // The innermost activity an exception leaves is where it happened; outer ones keep that.
  if (std::uncaught_exceptions() > uncaught_at_start_ && s.failed.empty())
    s.failed = describe(s.stack);
  if (!s.stack.empty()) s.stack.pop_back();
}

std::string current_activity() {
  auto& s = activities();
  std::lock_guard lock(s.mutex);
  return describe(s.stack);
}

std::string failed_activity() {
  auto& s = activities();
  std::lock_guard lock(s.mutex);
  return s.failed;
}

void clear_failed_activity() {
  auto& s = activities();
  std::lock_guard lock(s.mutex);
  s.failed.clear();
}

}  // namespace tessel
