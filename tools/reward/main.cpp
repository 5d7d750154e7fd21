#include "cudaagent/version.h"
#include <cstdio>
int main() { std::fputs(cudaagent::version_text("cudaagent-reward").c_str(), stdout); }
