// wcodecfs/fs_log.h — a small logger for the filesystem and the daemon.
//
// Lines go to stderr (foreground, tests) or to syslog (a daemonized mount has
// no terminal). Each line is one event: "wcodecfs: warn: <message>". The
// daemon's integrity errors (checksum mismatch) are logged here with the
// store file, tensor and chunk named by the codec's message.
//
// A test can capture lines with set_log_capture().
// Thread-safety: every function may be called from any thread; a line is
// written with one call (no interleaving inside a line).
#pragma once

#include <functional>
#include <string>

namespace wcodecfs {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

enum class LogSink { kStderr, kSyslog };

// Where lines go and the lowest level written (default: stderr, kInfo).
void set_log_sink(LogSink sink);
void set_log_level(LogLevel level);

// Every line (after level filtering) is also passed to `capture` when set;
// pass an empty function to stop. For tests.
void set_log_capture(std::function<void(LogLevel, const std::string&)> capture);

void log(LogLevel level, const std::string& msg);
// Whether messages of `level` are written (to skip building them).
bool log_enabled(LogLevel level);
inline void log_debug(const std::string& m) { log(LogLevel::kDebug, m); }
inline void log_info(const std::string& m) { log(LogLevel::kInfo, m); }
inline void log_warn(const std::string& m) { log(LogLevel::kWarn, m); }
inline void log_error(const std::string& m) { log(LogLevel::kError, m); }

// Logs `msg` only the first time `key` is seen in this process (warnings that
// would otherwise repeat on every lookup). Returns whether it logged.
bool log_once(LogLevel level, const std::string& key, const std::string& msg);

}  // namespace wcodecfs
