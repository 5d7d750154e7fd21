// The runner of the training unit tests: torch on one thread, so that every result (the learning
// curves included) is the same on every run and every machine.
#define DOCTEST_CONFIG_IMPLEMENT
#include <ATen/Parallel.h>
#include <doctest/doctest.h>

int main(int argc, char** argv) {
  at::set_num_threads(1);
  return doctest::Context(argc, argv).run();
}
