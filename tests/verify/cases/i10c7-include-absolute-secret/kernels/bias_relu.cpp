// Issue 10, class 7: an include of a file outside the workspace by absolute path (setup.sh writes
// the path in); also /etc/shadow, which a compiler quotes the first line of when it can read it.
#include "/etc/shadow"
#include "SECRET_PATH"
