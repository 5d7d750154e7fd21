/* Plays a launching library (a candidate's extension, cuBLAS) in the launcher-resolver test:
   it calls "the runtime", which calls back into the test, which walks the stack. */
int fake_runtime_call(int (*callback)(void*), void* argument);
int fake_launch(int (*callback)(void*), void* argument) __attribute__((noinline));

int fake_launch(int (*callback)(void*), void* argument) {
  int result = fake_runtime_call(callback, argument);
  __asm__ volatile("" ::: "memory");
  return result + 0;
}
