# A secret outside the workspace, named by its absolute path in the kernel: the sandboxed compiler
# cannot open it, and whatever it prints about it is named, never quoted.
printf 'TOPSECRET-c7-include hunter2\n' >../secret.txt
sed -i "s#SECRET_PATH#$(cd .. && pwd)/secret.txt#" kernels/bias_relu.cpp
