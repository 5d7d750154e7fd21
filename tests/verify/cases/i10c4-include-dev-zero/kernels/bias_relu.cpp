// Issue 10, class 4: one include of an endless device file. Without a memory limit cc1plus reads
// until the host is out of memory; with one it stops with "out of memory": FAIL_RESOURCE.
// (flags lowers the limit to 2560 MiB so the case is light on a CI machine.)
#include "/dev/zero"
