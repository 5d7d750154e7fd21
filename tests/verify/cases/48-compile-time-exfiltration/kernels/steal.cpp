// Catalog case 48: embeds a host file the sandboxed compiler must not be able to read.
asm(".section .rodata\n.globl stolen\nstolen:\n.incbin \"/etc/hostname\"\n.previous\n");
