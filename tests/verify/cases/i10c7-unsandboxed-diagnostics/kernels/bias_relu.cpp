// Issue 10, class 7, second layer: run without the sandbox (flags), so the compiler reads the file
// outside the workspace and quotes it in its errors; the diagnostics filter must drop every quoted
// line and name the file only. The record must hold none of its bytes.
int prefix = 0;
#include "SECRET_PATH"
