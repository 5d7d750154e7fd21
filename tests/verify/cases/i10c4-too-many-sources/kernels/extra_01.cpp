int extra_01 = 1;
