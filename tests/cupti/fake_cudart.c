/* Plays libcudart in the launcher-resolver test: its frame sits between the launcher and the
   callback, as the CUDA runtime's does, and must be skipped. Built as libcudart.so.99. */
int fake_runtime_call(int (*callback)(void*), void* argument) __attribute__((noinline));

int fake_runtime_call(int (*callback)(void*), void* argument) {
  int result = callback(argument);
  __asm__ volatile("" ::: "memory"); /* keeps this frame on the stack (no tail call) */
  return result + 0;
}
