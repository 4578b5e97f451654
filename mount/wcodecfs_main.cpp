// mount/wcodecfs_main.cpp — the wcodecfs daemon's main (mount/daemon.h):
//
//   wcodecfs STORE MOUNTPOINT [-o OPTIONS] [-f] [-d] [-s]
#include "daemon.h"

int main(int argc, char* argv[]) { return wcodecfs::mount::daemon_main(argc, argv, {}); }
