# A secret outside the workspace that the compiler CAN read (the case runs without the sandbox, the
# filter's own test): its path is written into the kernel.
printf 'TOPSECRET-c7-filter hunter2 = 1;\nsecond secret line;\n' >../secret.txt
sed -i "s#SECRET_PATH#$(cd .. && pwd)/secret.txt#" kernels/bias_relu.cpp
