// Issue 10, class 4: a file that includes itself; the preprocessor's depth limit ends it quickly.
#include __FILE__
