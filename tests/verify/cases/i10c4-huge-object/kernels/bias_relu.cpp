// Issue 10, class 4: an object of 200 MB of zeros; the file-size limit (16 MiB in flags) ends the
// assembler: FAIL_RESOURCE, and nothing that large reaches the disk.
__asm__(".section .rodata\n.fill 200000000,1,0\n.previous\n");
