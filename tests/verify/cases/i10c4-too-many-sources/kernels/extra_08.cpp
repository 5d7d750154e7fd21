int extra_08 = 8;
