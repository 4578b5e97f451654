// tests/joined_daemon_main.cpp — the wcodecfs daemon with the tests' joined
// kind added (joined_kind.h): the real-mount tests of the store-kind seam
// mount a store with it (test_mount_kinds.cpp).
#include "daemon.h"
#include "joined_kind.h"

int main(int argc, char* argv[]) {
  wcodecfs::mount::DaemonExtras extras;
  extras.kinds.push_back(std::make_shared<joinedkind::JoinedKind>());
  return wcodecfs::mount::daemon_main(argc, argv, extras);
}
