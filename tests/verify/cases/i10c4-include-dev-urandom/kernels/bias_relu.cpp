// Issue 10, class 4: an include of /dev/urandom, endless like /dev/zero: FAIL_RESOURCE.
#include "/dev/urandom"
