int extra_32 = 32;
