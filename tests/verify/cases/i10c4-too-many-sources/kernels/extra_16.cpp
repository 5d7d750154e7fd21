int extra_16 = 16;
