// fs/src/fs_log.cpp — see wcodecfs/fs_log.h.
#include "wcodecfs/fs_log.h"

#include <syslog.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <unordered_set>

namespace wcodecfs {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_sink{static_cast<int>(LogSink::kStderr)};

// Protects g_capture and g_once. Leaf lock: nothing else is locked under it
// except the capture callback, which must not log.
std::mutex g_mu;
std::function<void(LogLevel, const std::string&)> g_capture;
std::unordered_set<std::string> g_once;

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "?";
}

int syslog_priority(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return LOG_DEBUG;
    case LogLevel::kInfo: return LOG_INFO;
    case LogLevel::kWarn: return LOG_WARNING;
    case LogLevel::kError: return LOG_ERR;
  }
  return LOG_INFO;
}

}  // namespace

void set_log_sink(LogSink sink) {
  if (sink == LogSink::kSyslog) openlog("wcodecfs", LOG_PID, LOG_DAEMON);
  g_sink.store(static_cast<int>(sink));
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

void set_log_capture(std::function<void(LogLevel, const std::string&)> capture) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_capture = std::move(capture);
}

void log(LogLevel level, const std::string& msg) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  if (g_sink.load(std::memory_order_relaxed) == static_cast<int>(LogSink::kSyslog)) {
    syslog(syslog_priority(level), "%s: %s", level_name(level), msg.c_str());
  } else {
    const std::string line = std::string("wcodecfs: ") + level_name(level) + ": " + msg + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);  // one write per line
  }
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_capture) g_capture(level, msg);
}

bool log_once(LogLevel level, const std::string& key, const std::string& msg) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_once.insert(key).second) return false;
  }
  log(level, msg);
  return true;
}

}  // namespace wcodecfs
