// Issue 10, class 7: includes a hard link to a file outside the workspace (made by setup.sh).
#include "secret.h"
