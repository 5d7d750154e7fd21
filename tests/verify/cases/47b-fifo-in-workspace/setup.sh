mkfifo kernels/hang.cu
