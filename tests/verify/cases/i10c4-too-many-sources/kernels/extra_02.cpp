int extra_02 = 2;
