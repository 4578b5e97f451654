// mount/daemon.h — the wcodecfs daemon as a function, so that other mains
// can run it with more store kinds than the default ones (the tests' daemon
// mounts a kind that exists only in the tests).
//
// Thread-safety: call once per process (it parses the command line, may
// daemonize, and runs the FUSE session loop until unmounted).
#pragma once

#include "wcodecfs/store_kind.h"

namespace wcodecfs::mount {

struct DaemonExtras {
  // Kinds added after the default ones (lower precedence).
  StoreKinds kinds;
};

// `wcodecfs STORE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]`; returns the exit
// status (0 mounted and unmounted cleanly, 1 failure, 2 usage error).
int daemon_main(int argc, char* argv[], const DaemonExtras& extras);

}  // namespace wcodecfs::mount
